"""Objectives of the vision-language stages: ``clip`` (CLIP's symmetric contrastive loss) and ``vlm_ce``
(next-token cross-entropy of a :class:`~relin.models.vlm.model.BridgeVLM` on its supervised tokens)."""
from __future__ import annotations

from .base import Objective, ObjectiveOutput, register
from .ce import CrossEntropy


@register
class Contrastive(Objective):
    """CLIP's loss (mean of image->text and text->image cross-entropy over the batch), one target per pair."""

    name = "clip"
    requires = ("pixel_values", "input_ids", "attention_mask")

    def count_targets(self, batch):
        return int(batch["input_ids"].shape[0])

    def __call__(self, model, batch):
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    pixel_values=batch["pixel_values"], return_loss=True)
        import torch

        pairs = torch.arange(out.logits_per_image.shape[0], device=out.logits_per_image.device)
        correct = (out.logits_per_image.argmax(-1) == pairs).sum()
        return ObjectiveOutput(out.loss * batch["input_ids"].shape[0], {"accuracy": correct.detach().float()})


@register
class VisionCrossEntropy(CrossEntropy):
    """``ce`` with the image features passed to the model (``features [B, N, d_vision]``)."""

    name = "vlm_ce"
    requires = ("input_ids", "attention_mask", "labels", "features")

    def logits(self, model, batch):
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     features=batch["features"]).logits
