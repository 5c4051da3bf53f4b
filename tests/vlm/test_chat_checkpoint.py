"""The VLM on a checkpoint's chat LLM and CLIP tower: ``<image>`` becomes one special token with an embedding row
(LLaVA's mean initialisation), the LLM's own chat template is kept and its assistant turns are found without
generation marks, and the tower's pixels go through its own image processor."""
import json

import pytest
import torch

from relin.artifacts import IGNORE_INDEX
from relin.cli import main
from relin.errors import InputError
from relin.models.vlm.chat import IMAGE, encode_chat, encode_prompt, has_generation_marks

from ..fake_hub import QWEN25_CHAT_TEMPLATE, bpe_tokenizer, place_in_cache, save_checkpoint

CONVERSATION = [{"role": "user", "content": f"{IMAGE} is there a red circle ? answer yes or no ."},
                {"role": "assistant", "content": "yes"},
                {"role": "user", "content": "how many circles are there ?"},
                {"role": "assistant", "content": "two"}]


@pytest.fixture
def chat_tokenizer():
    tokenizer = bpe_tokenizer("qwen")
    tokenizer.chat_template = QWEN25_CHAT_TEMPLATE
    tokenizer.add_tokens([IMAGE], special_tokens=True)
    return tokenizer


def test_assistant_turns_of_a_template_without_generation_marks_are_found(chat_tokenizer):
    assert not has_generation_marks(chat_tokenizer.chat_template)
    ids, labels = encode_chat(chat_tokenizer, CONVERSATION)
    assert ids == chat_tokenizer.apply_chat_template(CONVERSATION, tokenize=True, return_dict=True)["input_ids"]
    supervised = chat_tokenizer.decode([label for label in labels if label != IGNORE_INDEX])
    assert supervised == "yes<|im_end|>\ntwo<|im_end|>\n", "content, end of turn and its newline; no role header"
    prompt = encode_prompt(chat_tokenizer, CONVERSATION[:1])
    assert chat_tokenizer.decode(prompt).startswith("<|im_start|>system\nYou are Qwen")
    assert ids[:len(prompt)] == prompt and all(label == IGNORE_INDEX for label in labels[:len(prompt)])


def test_a_template_whose_renderings_do_not_extend_each_other_is_refused_in_one_line(chat_tokenizer):
    # Renders the last turn differently from earlier ones (as reasoning templates that drop past thoughts do).
    chat_tokenizer.chat_template = ("{%- for m in messages -%}{%- if loop.last -%}<|im_start|>{{ m.role }}\n"
                                    "{{ m.content }}<|im_end|>{%- else -%}{{ m.content }}{%- endif -%}{%- endfor -%}"
                                    "{%- if add_generation_prompt -%}<|im_start|>assistant\n{%- endif -%}")
    with pytest.raises(InputError, match="cannot be found") as err:
        encode_chat(chat_tokenizer, CONVERSATION)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("spare_rows", [0, 64])
def test_the_image_token_gets_a_row_at_the_mean_of_the_others(tmp_path, spare_rows):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from relin.models.vlm.llm import add_image_token

    tokenizer = bpe_tokenizer("qwen")
    llm = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer) + spare_rows, hidden_size=16, num_hidden_layers=1,
                                       num_attention_heads=2, num_key_value_heads=1, intermediate_size=32,
                                       tie_word_embeddings=False))
    before = llm.get_input_embeddings().weight.detach().clone()
    image_id = add_image_token(llm, tokenizer)
    assert image_id == len(tokenizer) - 1 and tokenizer.convert_ids_to_tokens(image_id) == IMAGE
    assert tokenizer(f"a {IMAGE} b")["input_ids"].count(image_id) == 1, "one token, never split"
    rows = llm.get_input_embeddings().weight
    assert rows.shape[0] == max(len(tokenizer), before.shape[0])
    torch.testing.assert_close(rows[image_id], before[:image_id].mean(0))
    assert torch.equal(rows[:image_id], before[:image_id]), "existing rows untouched"
    out = llm.get_output_embeddings().weight
    assert out.shape[0] == rows.shape[0] and torch.isfinite(out[image_id]).all()
    assert add_image_token(llm, tokenizer) == image_id and len(tokenizer) == image_id + 1, "idempotent"


def test_chat_lm_on_a_checkpoint_keeps_its_template_and_adds_the_image_token(hub_cache, tmp_path, monkeypatch):
    from relin.data.tokenizer import load_tokenizer
    from relin.models.teachers import load_pretrained

    monkeypatch.setenv("RELIN_TRACKING", "0")
    place_in_cache(hub_cache, "Qwen/Qwen2.5-3B-Instruct", save_checkpoint("qwen2_chat", tmp_path / "ckpt"))
    original = load_tokenizer("Qwen/Qwen2.5-3B-Instruct")
    data = tmp_path / "vision"
    vision = {"lia_mtr.data": {"train_images": 4, "mme_images_per_category": 1}}
    assert main(["lia-mtr-synth-vision", "--config", json.dumps(vision), "--out", str(data)]) == 0
    out = tmp_path / "llm"
    assert main(["lia-mtr-chat-lm", "--config", json.dumps({"lia_mtr.llm": {"pretrained": "Qwen/Qwen2.5-3B-Instruct"}}),
                 "--data", str(data), "--out", str(out), "--history", str(tmp_path / "h.csv"),
                 "--metrics", str(tmp_path / "m.json"), "--checkpoints", str(tmp_path / "ckpt-runs")]) == 0
    saved, llm = load_tokenizer(out), load_pretrained(str(out))
    assert saved.chat_template == original.chat_template
    assert IMAGE in saved.get_vocab() and IMAGE not in original.get_vocab()
    assert llm.get_input_embeddings().weight.shape[0] == len(saved) == len(original) + 1
    assert json.loads((tmp_path / "m.json").read_text())["image_token_id"] == saved.convert_tokens_to_ids(IMAGE)


def test_a_checkpoint_tower_prepares_pixels_with_its_own_processor(hub_cache, tmp_path):
    from relin.models.vlm.tower import load_image_processor, load_vision_tower, patch_features

    place_in_cache(hub_cache, "openai/clip-vit-large-patch14", save_checkpoint("clip", tmp_path / "clip"))
    processor = load_image_processor("openai/clip-vit-large-patch14")
    assert processor is not None and list(processor.image_mean) == pytest.approx([0.48145466, 0.4578275, 0.40821073])
    processor.image_mean = [0.0, 0.0, 0.0]  # its own normalisation, not ours, reaches the tower
    tower = load_vision_tower("openai/clip-vit-large-patch14")
    images = torch.randint(0, 255, (3, 48, 48, 3), dtype=torch.uint8)
    ours = patch_features(tower, images, progress=False)
    theirs = patch_features(tower, images, progress=False, processor=processor)
    assert ours.shape == theirs.shape == (3, 16, 32) and not torch.allclose(ours, theirs)
    tower.save_pretrained(tmp_path / "trained")
    assert load_image_processor(tmp_path / "trained") is None
