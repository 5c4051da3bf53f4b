"""Walks on a cycle of item words: from a start item, written first, ``items - 1`` steps of a stride the prompt gives.

    walk from xbc by 6: xbc xbi xc xi xo ... <eos>

The ``vocab_size`` items ``xa, xb, ...`` (:func:`relin.data.lists.item_words`) stand on a fixed cycle; the answer
writes the start item out, then each item is the one ``stride`` places after the item before it. The cycle is learnt
in the weights (no retrieval from the context beyond the start and the stride), every answer is ``items`` tokens and
eos, checkable token by token, and one wrong item puts every later one off the gold walk: a long generation where
errors compound. (start, stride) pairs are split between train and test (:func:`held_out`, one in ``every``), so no
held-out walk is a training one, and every cycle a stride walks keeps training starts: a
held-out walk asks for steps the training walks take, from a start and stride never paired there (since every step,
the first included, goes from an item of the answer; a teacher trained on walks that stepped from the prompt's item
learnt the first step of each pair by heart: 0.72 exact, 36 of its 50 held-out walks wrong at the first step). The
test walks are distinct pairs (a greedy model answers a repeated prompt the same way: a repeat is no new item). Only
the answer and eos are supervised.
"""
from __future__ import annotations

import numpy as np

from .lists import item_words
from .rows import answer_row
from .walk_split import TEST_EVERY, held_out, test_pairs

TASK = "walk"
WORDS = ("walk", "from", "by")


def walk_words(vocab_size: int) -> list[str]:
    """Every word the family emits besides digits and ``:`` (for the tokenizer vocabulary)."""
    return [*WORDS, *item_words(vocab_size)]


def walk(start: int, stride: int, items: int, vocabulary: list[str]) -> list[str]:
    """``items`` items from ``vocabulary[start]`` on, each ``stride`` places after the one before (cyclic)."""
    return [vocabulary[(start + stride * i) % len(vocabulary)] for i in range(items)]


def parse_prompt(text: str) -> tuple[str, int]:
    """``(start item, stride)`` of a prompt's text ``walk from X by S:`` (an independent reading, for checks)."""
    words = text.strip().split()
    if len(words) != 5 or words[:2] != ["walk", "from"] or words[3] != "by" or not words[4].endswith(":"):
        raise ValueError(f"not a walk prompt: {text!r}")
    return words[2], int(words[4][:-1])


def generate_walks(count: int, items: int, max_stride: int, vocabulary: list[str], split: str, encoder,
                   rng: np.random.Generator, every: int = TEST_EVERY) -> list[dict]:
    """``count`` rows of ``split`` (``train``: pairs drawn with replacement; ``test``: distinct held-out pairs, at
    most all of them); a row's ``length`` is its tokens (bos and eos in)."""
    if split == "test":
        pairs = test_pairs(len(vocabulary), max_stride, every)
        if count > len(pairs):
            raise ValueError(f"{count} test walks: only {len(pairs)} distinct held-out (start, stride) pairs")
        chosen = [pairs[i] for i in sorted(rng.choice(len(pairs), size=count, replace=False))]
    else:
        chosen = []
        while len(chosen) < count:
            start, stride = int(rng.integers(len(vocabulary))), int(rng.integers(1, max_stride + 1))
            if not held_out(start, stride, len(vocabulary), every):
                chosen.append((start, stride))
    rows = []
    for start, stride in chosen:
        answer = " ".join(walk(start, stride, items, vocabulary))
        prompt, answer_ids = encoder.ids(f"walk from {vocabulary[start]} by {stride}:"), encoder.ids(answer)
        rows.append(answer_row(TASK, encoder.bos, encoder.eos, prompt, answer_ids, answer=answer, answers=[answer],
                               length=len(prompt) + len(answer_ids) + 2))
    return rows
