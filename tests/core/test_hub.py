"""Checkpoints by Hugging Face id from a local cache (offline), and damaged checkpoints as one-line errors."""
import shutil
from pathlib import Path

import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.data.tokenizer import load_tokenizer
from relin.errors import InputError
from relin.models.teachers import build_teacher, load_pretrained

from ..train.toydata import word_tokenizer


def byte_level_bpe(pad: bool):
    """A tiny byte-level BPE with Qwen's special tokens (and Pythia's lack of a pad token when ``pad`` is off)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    core.train_from_iterator(["the key is 1234 and the value is 5678"] * 20,
                             trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                                 initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>" if pad else None)


def place_in_cache(cache: Path, repo_id: str, source: Path, revision: str = "0" * 40) -> Path:
    """``source``'s files as the hub cache holds ``repo_id`` at ``main`` (models--owner--name/snapshots/<rev>)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    shutil.copytree(source, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_a_model_and_its_tokenizer_load_by_id_from_the_cache(hub_cache, tmp_path):
    bpe = byte_level_bpe(pad=True)
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
    byte_level_bpe(pad=False).save_pretrained(tmp_path)
    tokenizer = load_tokenizer(tmp_path)
    assert tokenizer.pad_token == tokenizer.eos_token == "<|im_end|>"


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
