"""Training objectives as plug-ins: a registry of exact names, each a small class.

An objective maps ``(model, batch)`` to a summed loss and the number of targets it sums over, so
the loop can normalise by the targets of a whole optimizer step (gradient accumulation then equals
one big batch). Objectives that need other networks (a frozen teacher for distillation) hold them
and list them in :meth:`Objective.frozen_modules`; the loop moves those to the device, keeps them
in eval mode and never gives them to the optimizer.
"""
from __future__ import annotations

import abc

from dataclasses import dataclass, field
from typing import ClassVar

import torch
import torch.nn.functional as F

from ..errors import ConfigError

IGNORE_INDEX = -100


@dataclass
class ObjectiveOutput:
    """One micro-batch: ``loss_sum`` (differentiable) over ``num_targets`` targets, plus extra sums
    (e.g. correct tokens) that the loop divides by the step's targets for logging."""

    loss_sum: torch.Tensor
    num_targets: torch.Tensor
    sums: dict[str, torch.Tensor] = field(default_factory=dict)


class Objective(abc.ABC):
    """Base class: subclasses set ``name`` and implement ``__call__``."""

    name: ClassVar[str] = ""

    def frozen_modules(self) -> list[torch.nn.Module]:
        """Networks the objective uses but does not train (e.g. a teacher)."""
        return []

    @abc.abstractmethod
    def __call__(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> ObjectiveOutput:
        """Loss summed over the batch's targets, the target count, and extra sums to log."""


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


def shifted_targets(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token alignment: logits ``[B, T, V]`` at position t predict ``labels[:, t + 1]``.
    Returns ``([N, V], [N])`` flattened."""
    return logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1)


@register
class CrossEntropy(Objective):
    """Next-token cross-entropy on the supervised label positions (``labels != -100``)."""

    name = "ce"

    def __call__(self, model, batch):
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        flat_logits, targets = shifted_targets(logits.float(), batch["labels"])
        supervised = targets != IGNORE_INDEX
        loss_sum = F.cross_entropy(flat_logits, targets, ignore_index=IGNORE_INDEX, reduction="sum")
        correct = ((flat_logits.argmax(-1) == targets) & supervised).sum()
        return ObjectiveOutput(loss_sum, supervised.sum(), {"accuracy": correct.detach()})
