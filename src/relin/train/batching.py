"""Dataset rows -> padded micro-batches, sampled deterministically per optimizer step.

The rows of each step are drawn from a generator seeded by ``(seed, step)``, so a resumed run sees
exactly the batches an uninterrupted run would, without saving an iterator. Rows are drawn with
replacement: uniformly, or, with ``TrainConfig.task_weights``, so that each task's share of the rows
is proportional to its weight (unlisted tasks weigh 1) whatever its number of rows, which keeps a
mixture fixed when the data config changes a task's size. With ``bucket_by_length`` a step first picks one
length bucket (rows of up to the next power of two tokens), weighted the same way, and draws all its
rows there, so short rows are not padded to the longest. A length curriculum
(``TrainConfig.curriculum``) restricts each step to rows of at most its stage's ``max_len`` tokens, and
a stage's ``batch_size`` (when set) replaces the batch size for its steps.
With several processes, each step draws ``world_size`` times the rows and each rank takes its slice.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from ..artifacts import IGNORE_INDEX
from ..data.token_rows import TokenRows
from ..errors import ConfigError, InputError


@dataclass(frozen=True)
class _Pool:
    """Rows a step may draw from: per bucket, indices and their within-bucket probabilities."""

    buckets: list[np.ndarray]
    row_probs: list[np.ndarray]
    bucket_probs: np.ndarray


class StepBatches:
    """Padded batches ``{"input_ids", "labels", "attention_mask"}`` (each ``[B, T]``) per step.

    Args:
        input_ids (TokenRows | Sequence[Sequence[int]]): token ids per row (a memory-mapped
            :class:`~relin.data.token_rows.TokenRows` is read row by row, never copied whole).
        labels (TokenRows | Sequence[Sequence[int]]): per-row targets aligned with ``input_ids`` (-100 = none).
        batch_size (int): rows per micro-batch and process (a curriculum stage's non-zero
            ``batch_size`` overrides it for that stage's steps).
        pad_id (int): id that fills ``input_ids`` past a row's end.
        seed (int): sampling seed.
        curriculum (Sequence): stages with ``until_step``, ``max_len`` and optionally ``batch_size``.
        tasks (Sequence[str], Optional): task name per row, for ``task_weights``.
        task_weights (Mapping[str, float]): mixture weight per task; unlisted tasks weigh 1.
        bucket_by_length (bool): draw each step from one length bucket. Default: ``False``.
        rank, world_size (int): this process's slice of each step's rows.
    """

    def __init__(self, input_ids: TokenRows | Sequence[Sequence[int]], labels: TokenRows | Sequence[Sequence[int]], *,
                 batch_size: int, pad_id: int, seed: int = 0, curriculum: Sequence = (),
                 tasks: Sequence[str] | None = None, task_weights: Mapping[str, float] | None = None,
                 bucket_by_length: bool = False, rank: int = 0, world_size: int = 1):
        if len(input_ids) != len(labels) or not input_ids:
            raise InputError(f"training rows: expected equal, non-zero numbers of input_ids and labels "
                             f"(got {len(input_ids)} and {len(labels)})")
        self.rows = input_ids if isinstance(input_ids, TokenRows) else TokenRows.from_lists(input_ids)
        self.labels = labels if isinstance(labels, TokenRows) else TokenRows.from_lists(labels)
        differ = np.flatnonzero(self.rows.lengths != self.labels.lengths)
        if differ.size:
            i = int(differ[0])
            raise InputError(f"training row {i}: input_ids ({self.rows.lengths[i]}) and labels "
                             f"({self.labels.lengths[i]}) differ in length")
        self.lengths = self.rows.lengths
        self.weights = self._row_weights(tasks, dict(task_weights or {}))
        self.batch_size, self.pad_id, self.seed = batch_size, pad_id, seed
        self.bucket_by_length, self.rank, self.world_size = bucket_by_length, rank, world_size
        self.stages = sorted(curriculum, key=lambda s: s.until_step)
        self._pools = {stage.max_len: self._pool(stage.max_len, stage.until_step) for stage in self.stages}
        full = int(self.lengths.max())
        self._pools.setdefault(full, self._pool(full, None))

    def _row_weights(self, tasks: Sequence[str] | None, task_weights: dict[str, float]) -> np.ndarray:
        if not task_weights:
            return np.ones(len(self.rows))
        if tasks is None or len(tasks) != len(self.rows):
            raise InputError("task_weights: needs the task of every training row")
        # a zero weight draws nothing, so it may name a task these rows lack (a mixture kept across datasets)
        unknown = {task for task, weight in task_weights.items() if weight > 0} - set(tasks)
        if unknown:
            raise ConfigError(f"task_weights: no training rows of task(s) {', '.join(sorted(unknown))} "
                              f"(tasks present: {', '.join(sorted(set(tasks)))})")
        rows_per_task = Counter(tasks)
        return np.array([task_weights.get(t, 1.0) / rows_per_task[t] for t in tasks], dtype=np.float64)

    def _pool(self, limit: int, until_step: int | None) -> _Pool:
        idx = np.flatnonzero((self.lengths <= limit) & (self.weights > 0))
        if idx.size == 0:
            where = f"curriculum stage until_step={until_step}" if until_step else "training rows"
            raise ConfigError(f"{where}: no row of positive task weight has at most max_len={limit} tokens "
                              f"(shortest has {self.lengths.min()})")
        if self.bucket_by_length:
            keys = 1 << np.ceil(np.log2(self.lengths[idx])).astype(np.int64)
            buckets = [idx[keys == k] for k in np.unique(keys)]
        else:
            buckets = [idx]
        mass = np.array([self.weights[b].sum() for b in buckets])
        return _Pool(buckets, [self.weights[b] / self.weights[b].sum() for b in buckets], mass / mass.sum())

    def _stage(self, step: int):
        return next((stage for stage in self.stages if step <= stage.until_step), None)

    def max_len(self, step: int) -> int:
        """The curriculum's length limit for optimizer step ``step`` (1-based)."""
        stage = self._stage(step)
        return stage.max_len if stage is not None else int(self.lengths.max())

    def rows_per_micro_batch(self, step: int) -> int:
        """This process's rows per micro-batch at optimizer step ``step``: the stage's, else ``batch_size``."""
        stage = self._stage(step)
        return stage.batch_size if stage is not None and stage.batch_size else self.batch_size

    def _draw(self, step: int, rows: int) -> np.ndarray:
        """``rows`` row indices of optimizer step ``step`` (for all ranks): one length bucket, then its rows."""
        pool = self._pools[self.max_len(step)]
        rng = np.random.default_rng([self.seed, step])
        bucket = rng.choice(len(pool.buckets), p=pool.bucket_probs)
        return rng.choice(pool.buckets[bucket], size=rows, p=pool.row_probs[bucket])

    def drawn(self, step: int, count: int) -> np.ndarray:
        """The row indices of optimizer step ``step``'s ``count`` micro-batches, every rank's (rank order)."""
        return self._draw(step, self.rows_per_micro_batch(step) * count * self.world_size)

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        """The ``count`` micro-batches of optimizer step ``step`` for this rank."""
        size = self.rows_per_micro_batch(step)
        per_rank = size * count
        chosen = self.drawn(step, count)
        mine = chosen[self.rank * per_rank:(self.rank + 1) * per_rank]
        return [self.collate(mine[i * size:(i + 1) * size]) for i in range(count)]

    def budget_batch(self, step: int, targets: int) -> dict[str, torch.Tensor]:
        """One micro-batch of step ``step``'s rows, taken in draw order until their next-token targets (every
        real next token: a row of n tokens holds n - 1) reach ``targets``; the last row is cut so that the
        batch holds exactly ``targets`` (single process)."""
        if targets < 1:
            raise ValueError(f"step {step}: a target budget of {targets} tokens holds no row")
        chosen, lengths, left = [], [], targets
        for i in self._draw(step, targets):
            take = min(int(self.lengths[i]), left + 1)
            chosen.append(i)
            lengths.append(take)
            left -= take - 1
            if left == 0:
                break
        return self.collate(np.array(chosen), np.array(lengths))

    def collate(self, indices: np.ndarray, lengths: np.ndarray | None = None) -> dict[str, torch.Tensor]:
        """Rows ``indices`` right-padded to the longest; ``lengths`` cuts each to its first tokens."""
        lengths = self.lengths[indices] if lengths is None else lengths
        width = int(lengths.max())
        input_ids = np.full((len(indices), width), self.pad_id, dtype=np.int64)
        labels = np.full((len(indices), width), IGNORE_INDEX, dtype=np.int64)
        mask = np.zeros((len(indices), width), dtype=np.int64)
        for row, (i, n) in enumerate(zip(indices, lengths)):
            input_ids[row, :n], labels[row, :n], mask[row, :n] = self.rows[i][:n], self.labels[i][:n], 1
        return {"input_ids": torch.from_numpy(input_ids), "labels": torch.from_numpy(labels),
                "attention_mask": torch.from_numpy(mask)}


def length_bin(tokens: int) -> str:
    """The power-of-two bin of a row of ``tokens`` tokens: ``"65-128"`` for 65 to 128."""
    top = 1 << max(0, int(tokens) - 1).bit_length()
    return f"{top // 2 + 1}-{top}"


class RowLengths:
    """:class:`StepBatches` that also reports, as its part of the run's budget, the lengths of the rows a run of
    ``steps`` optimizer steps of ``grad_accum`` micro-batches draws (every rank's) by power-of-two bin:
    ``{"row_lengths": {"65-128": {"rows": r, "tokens": t}, ...}}``, shortest bin first. Counted from the seeded
    draws themselves, so a resumed run reports its whole run; padding is not counted."""

    def __init__(self, inner: StepBatches, steps: int, grad_accum: int = 1):
        self.inner, self.steps, self.grad_accum = inner, steps, grad_accum

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        return self.inner.micro_batches(step, count)

    def max_len(self, step: int) -> int:
        return self.inner.max_len(step)

    def histogram(self) -> dict[str, dict[str, int]]:
        bins: dict[int, dict[str, int]] = {}
        for step in range(1, self.steps + 1):
            for tokens in self.inner.lengths[self.inner.drawn(step, self.grad_accum)].tolist():
                top = 1 << max(0, tokens - 1).bit_length()
                counts = bins.setdefault(top, {"rows": 0, "tokens": 0})
                counts["rows"] += 1
                counts["tokens"] += tokens
        return {length_bin(top): bins[top] for top in sorted(bins)}

    def budget(self) -> dict:
        return {"row_lengths": self.histogram()}


class TargetBudget:
    """:class:`StepBatches` held to another run's target tokens step by step (``targets_per_step[s - 1]`` at
    step ``s``): the off-policy control of OPAL's Table 3 takes as many optimizer steps and teacher-scored
    tokens as the on-policy run. One micro-batch per step, one process."""

    def __init__(self, inner: StepBatches, targets_per_step: Sequence[int]):
        if inner.world_size != 1:
            raise ConfigError("a target-budget control runs in one process (expected world_size 1)")
        self.inner, self.targets = inner, list(targets_per_step)

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        if count != 1:
            raise ConfigError(f"a target-budget control takes one micro-batch per step (expected grad_accum 1, "
                              f"got {count})")
        return [self.inner.budget_batch(step, self.targets[step - 1])]

    def max_len(self, step: int) -> int:
        return self.inner.max_len(step)
