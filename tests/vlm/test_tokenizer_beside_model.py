"""The chat tokenizer saved in a model directory (beside a qwen2 config.json, as lia-mtr-chat-lm and the bridge
stages write it) loads back as the same word tokenizer, so the bridge stages encode real words."""
from __future__ import annotations

from relin.data.tokenizer import load_tokenizer
from relin.models.vlm.chat import build_chat_tokenizer


def test_tokenizer_saved_beside_a_qwen2_config_keeps_its_words(tmp_path):
    from transformers import Qwen2Config

    tokenizer = build_chat_tokenizer(["how", "many", "objects", "are", "there", "one", "user", "assistant"])
    tokenizer.save_pretrained(tmp_path)
    Qwen2Config(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, intermediate_size=32).save_pretrained(tmp_path)
    messages = [{"role": "user", "content": "<image> how many objects are there ?"},
                {"role": "assistant", "content": "one ."}]
    loaded = load_tokenizer(tmp_path)
    text = "<|im_start|>user <image> how many objects are there ?<|im_end|>"
    assert loaded.tokenize(text) == tokenizer.tokenize(text)
    assert "▁many" in loaded.tokenize(text)
    expected = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"]
    assert loaded.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"] == expected
