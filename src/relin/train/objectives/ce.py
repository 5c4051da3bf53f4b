"""``ce``: next-token cross-entropy on the supervised label positions."""
from __future__ import annotations

import torch.nn.functional as F

from ...artifacts import IGNORE_INDEX, next_token_pairs
from .base import Objective, ObjectiveOutput, next_token_mask, register


@register
class CrossEntropy(Objective):
    """Next-token cross-entropy where ``labels != -100``; logs token accuracy."""

    name = "ce"
    requires = ("input_ids", "attention_mask", "labels")

    def count_targets(self, batch):
        return int(next_token_mask(batch, "labels").sum())

    def logits(self, model, batch):
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits

    def __call__(self, model, batch):
        logits = self.logits(model, batch)
        logits, targets = next_token_pairs(logits.float(), batch["labels"])
        logits, targets = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
        loss_sum = F.cross_entropy(logits, targets, ignore_index=IGNORE_INDEX, reduction="sum")
        correct = ((logits.argmax(-1) == targets) & (targets != IGNORE_INDEX)).sum()
        return ObjectiveOutput(loss_sum, {"accuracy": correct.detach()})
