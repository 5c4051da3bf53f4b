"""Which (start, stride) pairs of a walk (:mod:`relin.data.walk`) are held out for the test split: arithmetic alone,
so that the walk config can count them without importing the data code."""
from __future__ import annotations

import math

# One (start, stride) pair in this many is held out for the test split, unless a config says otherwise.
TEST_EVERY = 8


def held_out(start: int, stride: int, vocab_size: int, every: int = TEST_EVERY) -> bool:
    """Whether the pair is a test walk. A stride ``k`` walks the items ``start`` shares a residue with modulo
    ``g = gcd(k, vocab_size)``; they are ``r + g j`` for ``j < vocab_size / g``, and only ``j ≡ -k (mod every)``
    is held out, so each such cycle keeps a training start. (Reading the residue of ``start + k`` instead held out
    every start of stride 8's cycles through multiples of 8 on 64 items: steps no training walk took.)"""
    return (start // math.gcd(stride, vocab_size) + stride) % every == 0


def test_pairs(vocab_size: int, max_stride: int, every: int = TEST_EVERY) -> list[tuple[int, int]]:
    """Every held-out (start, stride) pair, in order."""
    return [(start, stride) for stride in range(1, max_stride + 1) for start in range(vocab_size)
            if held_out(start, stride, vocab_size, every)]
