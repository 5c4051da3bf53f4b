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


@register
class RowMeanCrossEntropy(CrossEntropy):
    """Next-token cross-entropy averaged within each row, then over rows: every row weighs the same, however
    many supervised tokens it holds. A one-word answer after a long prompt then counts as much as a caption
    whose every token is a target (under ``ce`` the captions' tokens outweigh a set of yes/no answers many
    times over). Targets are the rows with at least one supervised token; logs the per-row token accuracy."""

    name = "ce_row_mean"

    def count_targets(self, batch):
        return int(next_token_mask(batch, "labels").any(1).sum())

    def __call__(self, model, batch):
        logits = self.logits(model, batch)
        logits, targets = next_token_pairs(logits.float(), batch["labels"])
        token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX,
                                reduction="none").view(targets.shape)                # [B, T-1]
        mask = targets != IGNORE_INDEX
        per_row = mask.sum(1)
        rows = per_row > 0
        loss = ((token * mask).sum(1) / per_row.clamp(min=1))[rows].sum()
        correct = (((logits.argmax(-1) == targets) & mask).sum(1) / per_row.clamp(min=1))[rows].sum()
        return ObjectiveOutput(loss, {"accuracy": correct.detach()})
