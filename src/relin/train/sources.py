"""Batch sources over indexed rows that are not plain token rows (image-text pairs, feature-text rows).

:class:`RowBatches` draws each step's rows from a generator seeded by ``(seed, step)`` (a resumed run sees
the batches an uninterrupted run would) and asks ``collate(indices)`` for the tensors; with several
processes each rank takes its slice of the step's rows.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from ..artifacts import IGNORE_INDEX


class RowBatches:
    """``micro_batches(step, count)`` of ``batch_size`` rows drawn uniformly (with replacement) from ``num_rows``."""

    def __init__(self, num_rows: int, collate: Callable[[np.ndarray], dict[str, torch.Tensor]], *, batch_size: int,
                 seed: int = 0, max_len: int = 0, rank: int = 0, world_size: int = 1):
        self.num_rows, self.collate, self.batch_size, self.seed = num_rows, collate, batch_size, seed
        self.longest, self.rank, self.world_size = max_len, rank, world_size

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        rng = np.random.default_rng([self.seed, step])
        picks = rng.integers(0, self.num_rows, size=(count, self.world_size, self.batch_size))
        return [self.collate(picks[i, self.rank]) for i in range(count)]

    def max_len(self, step: int) -> int:
        return self.longest


def pad_rows(ids: list[list[int]], labels: list[list[int]], pad_id: int, left: bool = False
             ) -> dict[str, torch.Tensor]:
    """``input_ids``, ``labels`` and ``attention_mask`` ``[B, T]`` of rows padded to the longest."""
    width = max(map(len, ids))
    out_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
    out_labels = torch.full((len(ids), width), IGNORE_INDEX, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, (row, lab) in enumerate(zip(ids, labels)):
        span = slice(width - len(row), width) if left else slice(0, len(row))
        out_ids[i, span], out_labels[i, span], mask[i, span] = torch.tensor(row), torch.tensor(lab), 1
    return {"input_ids": out_ids, "labels": out_labels, "attention_mask": mask}
