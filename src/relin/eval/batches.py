"""Equal-length batches: examples grouped by exact token length, then cut to the batch size.

Padding is avoided rather than masked because the models evaluated include recurrent students
(linear attention, Gated DeltaNet) whose state would absorb pad tokens; equal lengths make every
architecture see exactly the tokens of its example.
"""
from __future__ import annotations

from collections import defaultdict


def equal_length_batches(lengths: list[int], batch_size: int) -> list[list[int]]:
    """Indices into ``lengths`` grouped so that each batch holds examples of one length.

    Batches are ordered by length, then by first index; every index appears exactly once.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size: expected >= 1, got {batch_size}")
    by_length: dict[int, list[int]] = defaultdict(list)
    for index, length in enumerate(lengths):
        by_length[length].append(index)
    return [group[start:start + batch_size]
            for _, group in sorted(by_length.items())
            for start in range(0, len(group), batch_size)]
