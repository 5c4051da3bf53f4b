"""Rows of the real-text corpus (task ``text``): the language the teachers learn beside the synthetic tasks, and the
held-out files every perplexity is measured on.

Train rows are cut from the train files joined by eos, each ``bos`` + the next ``length - 1`` tokens, the lengths
taken in turn from ``data.text.train_lengths`` (short rows serve a length curriculum, long ones what follows it).
Test rows are whole files, one each, cut to ``data.text.test_len``: a token's position in its row is its position in
its file, so perplexity by position (:data:`POSITION_BINS`) says how much a model uses the file's earlier text.
Every token after ``bos`` is supervised.
"""
from __future__ import annotations

from typing import Iterable

from ..artifacts import IGNORE_INDEX
from ..config.data import TextConfig
from .rows import row

TASK = "text"
# Token positions (1-based, bos at 0) perplexity is reported by: local, paragraph and file-scale context.
POSITION_BINS = ((1, 64), (65, 256), (257, None))


def bin_name(first: int, last: int | None) -> str:
    return f"{first}-{last}" if last is not None else f"{first}+"


def _ids(texts: Iterable[str], tokenizer) -> list[list[int]]:
    return [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]


def text_train_rows(texts: list[str], tokenizer, bos: int, eos: int, cfg: TextConfig) -> list[dict]:
    """Up to ``cfg.train_examples`` rows cut in turn at ``cfg.train_lengths`` from ``texts`` joined by eos."""
    stream = [i for ids in _ids(texts, tokenizer) for i in (*ids, eos)]
    rows, start = [], 0
    while len(rows) < cfg.train_examples:
        length = cfg.train_lengths[len(rows) % len(cfg.train_lengths)]
        piece = stream[start:start + length - 1]
        if len(piece) < length - 1:
            break
        rows.append(row(TASK, [bos, *piece], [IGNORE_INDEX, *piece], length=length))
        start += length - 1
    return rows


def text_test_rows(texts: list[str], tokenizer, bos: int, cfg: TextConfig) -> list[dict]:
    """One row per file (the first ``cfg.test_files``), ``bos`` + its first ``cfg.test_len - 1`` tokens."""
    rows = []
    for ids in _ids(texts[:cfg.test_files], tokenizer):
        piece = ids[:cfg.test_len - 1]
        if piece:
            rows.append(row(TASK, [bos, *piece], [IGNORE_INDEX, *piece], length=len(piece) + 1))
    return rows
