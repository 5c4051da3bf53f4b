"""What the training loop asks of the thing its micro-batches come from, and of sources that do more."""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import torch


class BatchSource(Protocol):
    """Where a training run's micro-batches come from (:class:`~relin.train.batching.StepBatches`
    for dataset rows; image-text pairs and on-policy rollouts bring their own).

    A source must be deterministic in ``step`` (a resumed run sees the batches an uninterrupted run
    would) and give each rank its own share. Batches are dicts of ``[B, ...]`` tensors holding at
    least what the objective ``requires``.
    """

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        """The ``count`` micro-batches of optimizer step ``step`` (1-based) for this rank."""

    def max_len(self, step: int) -> int:
        """The longest sequence step ``step`` may hold (logged; a curriculum raises it)."""


@runtime_checkable
class AdaptiveSource(Protocol):
    """A :class:`BatchSource` that adapts to training (on-policy rollouts and their horizon curriculum)."""

    def observe(self, step: int, metrics: dict[str, float]) -> dict[str, float]:
        """After each step: its reduced metrics in, extra metrics to log out."""

    def state_dict(self) -> dict:
        """Saved in every checkpoint."""

    def load_state_dict(self, state: dict) -> None:
        """Restored from the checkpoint a run resumes from."""


@runtime_checkable
class CostedSource(Protocol):
    """A :class:`BatchSource` whose batches cost something beyond the training forward (rollout tokens)."""

    def budget(self) -> dict:
        """What producing the batches cost, added to the run's :class:`~relin.train.budget.Budget`."""
