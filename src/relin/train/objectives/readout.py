"""``readout_ce``: cross-entropy of a model that reads one class per sequence (``model(input_ids) -> [B, C]``),
e.g. the bridge-isolated NIAH probe naming its needle; logs accuracy."""
from __future__ import annotations

import torch.nn.functional as F

from .base import Objective, ObjectiveOutput, register


@register
class ReadoutCrossEntropy(Objective):
    """Cross-entropy of ``model(batch["input_ids"])`` (``[B, C]`` logits) against ``batch["targets"]`` (``[B]``)."""

    name = "readout_ce"
    requires = ("input_ids", "attention_mask", "targets")

    def count_targets(self, batch):
        return int(batch["targets"].numel())

    def __call__(self, model, batch):
        logits = model(batch["input_ids"]).float()
        loss_sum = F.cross_entropy(logits, batch["targets"], reduction="sum")
        correct = (logits.argmax(-1) == batch["targets"]).sum()
        return ObjectiveOutput(loss_sum, {"accuracy": correct.detach()})
