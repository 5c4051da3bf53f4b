"""Checkpoints by Hugging Face id from a local cache (offline), and damaged checkpoints as one-line errors."""
import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.data.tokenizer import load_tokenizer
from relin.errors import InputError
from relin.models.teachers import build_teacher, load_pretrained

from ..fake_hub import bpe_tokenizer, place_in_cache
from ..train.toydata import word_tokenizer


def test_a_model_and_its_tokenizer_load_by_id_from_the_cache(hub_cache, tmp_path):
    bpe = bpe_tokenizer("qwen")
    model = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, head_dim=8), bpe).eval()
    model.save_pretrained(tmp_path / "saved")
    bpe.save_pretrained(tmp_path / "saved")
    place_in_cache(hub_cache, "relin-test/tiny-qwen3", tmp_path / "saved")
    loaded = load_pretrained("relin-test/tiny-qwen3").eval()
    ids = torch.randint(0, len(bpe), (1, 9))
    torch.testing.assert_close(loaded(input_ids=ids).logits, model(input_ids=ids).logits)
    tokenizer = load_tokenizer("relin-test/tiny-qwen3")
    assert tokenizer("the key is 1234")["input_ids"] == bpe("the key is 1234")["input_ids"]


def test_a_tokenizer_without_pad_pads_with_eos(tmp_path):
    bpe_tokenizer("pythia").save_pretrained(tmp_path)
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer.pad_token == tokenizer.eos_token == "<|endoftext|>"


def test_an_id_missing_from_the_cache_is_one_line_saying_how_to_get_it(hub_cache):
    for load in (load_pretrained, load_tokenizer):
        with pytest.raises(InputError) as err:
            load("relin-test/absent-model")
        message = str(err.value)
        assert "\n" not in message and str(hub_cache) in message and "hf download relin-test/absent-model" in message


@pytest.mark.parametrize("damage", ["truncated", "overwritten"])
def test_a_damaged_safetensors_file_is_one_line(tmp_path, damage):
    model = build_teacher(TeacherModelConfig(family="gpt_neox", hidden_size=32), word_tokenizer())
    model.save_pretrained(tmp_path)
    weights = tmp_path / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[:len(data) // 2] if damage == "truncated" else b"\0" * len(data))
    with pytest.raises(InputError) as err:
        load_pretrained(str(tmp_path))
    assert "\n" not in str(err.value) and "damaged or incomplete" in str(err.value)
    assert weights.read_bytes() != data and weights.stat().st_size in (len(data), len(data) // 2), "left as found"


def test_a_clip_tower_loads_by_id(hub_cache, tmp_path):
    from transformers import CLIPConfig, CLIPModel

    from relin.models.vlm.tower import load_vision_tower

    config = CLIPConfig(text_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
                                     "num_attention_heads": 2, "vocab_size": 50},
                        vision_config={"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
                                       "num_attention_heads": 2, "image_size": 8, "patch_size": 4},
                        projection_dim=8)
    CLIPModel(config).save_pretrained(tmp_path / "clip")
    place_in_cache(hub_cache, "relin-test/tiny-clip", tmp_path / "clip")
    tower = load_vision_tower("relin-test/tiny-clip")
    assert type(tower).__name__ == "CLIPVisionModel" and tower.config.num_hidden_layers == 2
