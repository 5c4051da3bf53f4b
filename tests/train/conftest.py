"""Fixtures: a word-level tokenizer and a tiny dataset saved like ``relin synth-text``'s output."""
from __future__ import annotations

from pathlib import Path

import pytest

from .toydata import toy_rows, word_tokenizer


@pytest.fixture(scope="session")
def tokenizer():
    return word_tokenizer()


@pytest.fixture(scope="session")
def toy_dataset(tmp_path_factory, tokenizer) -> Path:
    """A saved ``DatasetDict`` (train/test) plus ``tokenizer/``, laid out like ``relin synth-text``."""
    from datasets import Dataset, DatasetDict

    root = tmp_path_factory.mktemp("synth_text")
    DatasetDict({"train": Dataset.from_list(toy_rows(tokenizer, 512, seed=1)),
                 "test": Dataset.from_list(toy_rows(tokenizer, 64, seed=2))}).save_to_disk(str(root))
    tokenizer.save_pretrained(str(root / "tokenizer"))
    return root
