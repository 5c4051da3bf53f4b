"""The objective interface and its registry of exact names.

An objective maps a micro-batch to a summed loss. Before any forward pass the loop asks it how many
targets the micro-batch holds (:meth:`Objective.count_targets`: supervised tokens for cross-entropy
and distillation, positions per aligned layer for alignment, sampled positions for on-policy
distillation), sums that over the step's micro-batches and ranks, and scales every summed loss by
it, so gradient accumulation and data parallelism equal one big batch for every objective. The count
comes from the batch alone, because the scale must be known before the first backward.

Objectives that need other networks (a frozen teacher) hold them and list them in
:meth:`Objective.frozen_modules`; the loop moves those to the device once, keeps them in eval mode
and never gives them to the optimizer.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import ClassVar

import torch

from ...errors import ConfigError, InputError


@dataclass
class ObjectiveOutput:
    """One micro-batch: ``loss_sum`` (differentiable, summed over the micro-batch's targets),
    extra sums (e.g. correct tokens) that the loop divides by the step's targets for logging, and
    maxima (names ending ``_max``) that it logs as the largest over the step's micro-batches and ranks."""

    loss_sum: torch.Tensor
    sums: dict[str, torch.Tensor] = field(default_factory=dict)
    maxima: dict[str, torch.Tensor] = field(default_factory=dict)


class Objective(abc.ABC):
    """Base class: subclasses set ``name`` and ``requires`` and implement the two methods."""

    name: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ("input_ids", "attention_mask")

    def frozen_modules(self) -> list[torch.nn.Module]:
        """Networks the objective uses but does not train (e.g. a teacher)."""
        return []

    def check_batch(self, batch: dict[str, torch.Tensor]) -> None:
        """One line naming what a batch source failed to provide."""
        missing = [key for key in self.requires if key not in batch]
        if missing:
            raise InputError(f"objective {self.name}: the batches lack {', '.join(missing)} "
                             f"(it needs {', '.join(self.requires)}; got {', '.join(batch)})")

    def finalize(self, metrics: dict[str, float]) -> dict[str, float]:
        """The step's logged metrics from its reduced sums (e.g. ratios of two sums); identity by default."""
        return metrics

    @abc.abstractmethod
    def count_targets(self, batch: dict[str, torch.Tensor]) -> int:
        """Targets the summed loss of ``batch`` runs over (computed before the forward pass)."""

    @abc.abstractmethod
    def __call__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> ObjectiveOutput:
        """Loss summed over the batch's targets, and extra sums to log."""


OBJECTIVES: dict[str, type[Objective]] = {}


def register(cls: type[Objective]) -> type[Objective]:
    if not cls.name or cls.name in OBJECTIVES:
        raise ValueError(f"objective {cls.__name__}: needs a unique name (got {cls.name!r})")
    OBJECTIVES[cls.name] = cls
    return cls


def build_objective(name: str, **kwargs) -> Objective:
    if name not in OBJECTIVES:
        raise ConfigError(f"objective: unknown {name!r} (expected one of: {', '.join(OBJECTIVES)})")
    return OBJECTIVES[name](**kwargs)


def next_token_mask(batch: dict[str, torch.Tensor], positions: str = "labels") -> torch.Tensor:
    """``[B, T-1]`` bool: the positions t whose next token is a target.

    ``"labels"``: ``labels[:, t+1] != IGNORE_INDEX`` (supervised tokens); ``"all"``: every real
    (non-padding) next token, as distillation on plain text wants.
    """
    from ...artifacts import IGNORE_INDEX

    if positions == "labels":
        return batch["labels"][:, 1:] != IGNORE_INDEX
    if positions == "all":
        mask = batch["attention_mask"].bool()
        return mask[:, 1:] & mask[:, :-1]
    raise ConfigError(f"positions: expected 'labels' or 'all', got {positions!r}")
