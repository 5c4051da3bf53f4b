"""The chat LLM: a tiny ``Qwen2ForCausalLM`` from :class:`~relin.config.lia_mtr.LLMConfig` (the paper:
Qwen/Qwen2.5-3B-Instruct, the same class), with the chat tokenizer's vocabulary."""
from __future__ import annotations


def build_llm(cfg, tokenizer, seed: int = 0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=cfg.hidden_size,
                         num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
                         num_key_value_heads=cfg.num_key_value_heads, intermediate_size=cfg.intermediate_size,
                         max_position_embeddings=1024, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)
