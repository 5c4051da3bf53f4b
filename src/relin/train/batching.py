"""Dataset rows -> padded micro-batches, sampled deterministically per optimizer step.

The rows of each step are drawn from a generator seeded by ``(seed, step)``, so a resumed run sees
exactly the batches an uninterrupted run would, without saving an iterator. A length curriculum
(``TrainConfig.curriculum``) restricts each step to rows of at most its stage's ``max_len`` tokens.
With several processes, each step draws ``world_size`` times the rows and each rank takes its slice.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from ..errors import ConfigError, InputError
from .objectives import IGNORE_INDEX


class StepBatches:
    """Padded batches ``{"input_ids", "labels", "attention_mask"}`` (each ``[B, T]``) per step.

    Args:
        input_ids (Sequence[Sequence[int]]): token ids per row.
        labels (Sequence[Sequence[int]]): per-row targets aligned with ``input_ids`` (-100 = none).
        batch_size (int): rows per micro-batch and process.
        pad_id (int): id that fills ``input_ids`` past a row's end.
        seed (int): sampling seed.
        curriculum (Sequence): stages with ``until_step`` and ``max_len``, in increasing ``until_step``.
        rank, world_size (int): this process's slice of each step's rows.
    """

    def __init__(self, input_ids: Sequence[Sequence[int]], labels: Sequence[Sequence[int]], *,
                 batch_size: int, pad_id: int, seed: int = 0, curriculum: Sequence = (),
                 rank: int = 0, world_size: int = 1):
        if len(input_ids) != len(labels) or not input_ids:
            raise InputError(f"training rows: expected equal, non-zero numbers of input_ids and labels "
                             f"(got {len(input_ids)} and {len(labels)})")
        self.rows = [np.asarray(ids, dtype=np.int64) for ids in input_ids]
        self.labels = [np.asarray(lab, dtype=np.int64) for lab in labels]
        for i, (ids, lab) in enumerate(zip(self.rows, self.labels)):
            if ids.shape != lab.shape:
                raise InputError(f"training row {i}: input_ids ({ids.size}) and labels ({lab.size}) "
                                 f"differ in length")
        self.lengths = np.array([r.size for r in self.rows])
        self.batch_size, self.pad_id, self.seed = batch_size, pad_id, seed
        self.rank, self.world_size = rank, world_size
        self.stages = sorted(curriculum, key=lambda s: s.until_step)
        self._eligible = {}
        for stage in self.stages:
            idx = np.flatnonzero(self.lengths <= stage.max_len)
            if idx.size == 0:
                raise ConfigError(f"curriculum stage until_step={stage.until_step}: no training row has at "
                                  f"most max_len={stage.max_len} tokens (shortest has {self.lengths.min()})")
            self._eligible[stage.max_len] = idx
        self._all = np.arange(len(self.rows))

    def max_len(self, step: int) -> int:
        """The curriculum's length limit for optimizer step ``step`` (1-based)."""
        for stage in self.stages:
            if step <= stage.until_step:
                return stage.max_len
        return int(self.lengths.max())

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        """The ``count`` micro-batches of optimizer step ``step`` for this rank."""
        limit = self.max_len(step)
        pool = self._eligible.get(limit, self._all)
        rng = np.random.default_rng([self.seed, step])
        per_rank = self.batch_size * count
        chosen = rng.choice(pool, size=per_rank * self.world_size, replace=pool.size < per_rank * self.world_size)
        mine = chosen[self.rank * per_rank:(self.rank + 1) * per_rank]
        return [self.collate(mine[i * self.batch_size:(i + 1) * self.batch_size]) for i in range(count)]

    def collate(self, indices: np.ndarray) -> dict[str, torch.Tensor]:
        width = int(self.lengths[indices].max())
        input_ids = np.full((len(indices), width), self.pad_id, dtype=np.int64)
        labels = np.full((len(indices), width), IGNORE_INDEX, dtype=np.int64)
        mask = np.zeros((len(indices), width), dtype=np.int64)
        for row, i in enumerate(indices):
            n = self.lengths[i]
            input_ids[row, :n], labels[row, :n], mask[row, :n] = self.rows[i], self.labels[i], 1
        return {"input_ids": torch.from_numpy(input_ids), "labels": torch.from_numpy(labels),
                "attention_mask": torch.from_numpy(mask)}
