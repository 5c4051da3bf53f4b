"""``onpolicy``: OPAL stage 3's loss on student rollouts: the position-wise reverse KL to the frozen
teacher over the sampled continuation (the ``labels`` positions), full vocabulary or the sampled-token
estimator (:mod:`.kd`), plus the KL by position in the continuation for the logs (bucketed 1, 2,
3-4, 5-8, ... tokens after the prompt)."""
from __future__ import annotations

import torch

from ...artifacts import IGNORE_INDEX
from ..teacher import FrozenTeacher
from .base import ObjectiveOutput, register
from .kd import Distillation

BUCKETS = 12  # positions up to 2**11 after the prompt; later ones join the last bucket


def position_bucket(offset: torch.Tensor) -> torch.Tensor:
    """0 for the first generated token, then ⌈log2(offset + 1)⌉: 1, 2, 3-4, 5-8, ..."""
    return torch.ceil(torch.log2(offset.float() + 1)).long().clamp(max=BUCKETS - 1)


def bucket_label(bucket: int) -> str:
    lo, hi = (1, 1) if bucket == 0 else (2 ** (bucket - 1) + 1, 2 ** bucket)
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


@register
class OnPolicyDistillation(Distillation):
    name = "onpolicy"

    def __init__(self, teacher: FrozenTeacher, divergence: str = "reverse_kl", chunk_size: int = 1024):
        super().__init__(teacher, divergence, positions="labels", chunk_size=chunk_size)

    def __call__(self, model, batch):
        loss, kl, mask = self.per_position(model, batch)
        labels = batch["labels"][:, 1:]
        first = (labels != IGNORE_INDEX).float().argmax(-1, keepdim=True)
        offset = torch.arange(labels.shape[1], device=labels.device)[None] - first
        buckets = position_bucket(offset[mask])
        sums = {"kl": kl.sum()}
        for b in range(BUCKETS):
            chosen = buckets == b
            sums[f"kl_at/{b:02d}"] = kl[chosen].sum()
            sums[f"tokens_at/{b:02d}"] = chosen.sum().to(kl.dtype)
        return ObjectiveOutput(loss, sums)

    def finalize(self, metrics: dict[str, float]) -> dict[str, float]:
        """Per-bucket sums (each divided by the step's targets) -> the mean KL at those positions."""
        out = {k: v for k, v in metrics.items() if not k.startswith(("kl_at/", "tokens_at/"))}
        for b in range(BUCKETS):
            tokens = metrics.get(f"tokens_at/{b:02d}", 0.0)
            if tokens > 0:
                out[f"kl_at_position/{bucket_label(b)}"] = metrics[f"kl_at/{b:02d}"] / tokens
        return out
