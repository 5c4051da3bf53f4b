"""Fixtures for evaluation tests: the project's word tokenizer, contract rows of every task family
and a tiny random Qwen3 saved with ``save_pretrained``."""
from __future__ import annotations

import pytest
import torch

from relin.data.tokenizer import WordEncoder, build_tokenizer

from .helpers import WORDS, all_family_rows


@pytest.fixture
def tokenizer():
    return build_tokenizer("word", WORDS)


@pytest.fixture
def encoder(tokenizer):
    return WordEncoder(tokenizer)


@pytest.fixture
def rows(encoder):
    return all_family_rows(encoder, torch.Generator().manual_seed(int(torch.randint(1 << 30, ()))))


@pytest.fixture
def dataset(rows):
    from datasets import Dataset

    return Dataset.from_list(rows)


@pytest.fixture
def tiny_qwen3_dir(tmp_path, tokenizer):
    """A random 1-layer ``Qwen3ForCausalLM`` over the fixture tokenizer, saved with ``save_pretrained``."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         num_key_value_heads=2, head_dim=16, intermediate_size=64, max_position_embeddings=256,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True)
    torch.manual_seed(int(torch.randint(1 << 30, ())))
    path = tmp_path / "model"
    Qwen3ForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
