"""``onpolicy``: OPAL stage 3's loss on student rollouts: the position-wise reverse KL to the frozen
teacher over the sampled continuation (the ``labels`` positions), full vocabulary or the sampled-token
estimator (:mod:`.kd`), plus the KL by position in the continuation for the logs (bucketed 1, 2,
3-4, 5-8, ... tokens after the prompt).

When the rollouts carry the log-probs the sampler drew their tokens with (``sampled_logprobs``, see
:class:`~relin.train.rollouts.OnPolicyRollouts`), it also logs the gap between the sampling path (the
recurrent decode step) and this training forward (the chunk kernel) at the same tokens, read from the
log-softmax the loss computes anyway (:mod:`relin.models.logprob_gap`): ``logprob_gap_mean`` (mean
``|Δ log p|`` per sampled token), ``logprob_gap_max`` (its max over the step), ``logprob_gap_seq_mean``
and ``logprob_gap_seq_max`` (``|Σ_t Δ log p_t|`` per rollout, its mean and max over the step's rollouts)."""
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
        loss, kl, log_q, mask = self.per_position(model, batch)
        labels = batch["labels"][:, 1:]
        first = (labels != IGNORE_INDEX).float().argmax(-1, keepdim=True)
        offset = torch.arange(labels.shape[1], device=labels.device)[None] - first
        buckets = position_bucket(offset[mask])
        sums = {"kl": kl.sum()}
        for b in range(BUCKETS):
            chosen = buckets == b
            sums[f"kl_at/{b:02d}"] = kl[chosen].sum()
            sums[f"tokens_at/{b:02d}"] = chosen.sum().to(kl.dtype)
        maxima = {}
        if "sampled_logprobs" in batch:
            gap_sums, maxima = logprob_gap_terms(log_q, batch["sampled_logprobs"][:, 1:], mask)
            sums.update(gap_sums)
        return ObjectiveOutput(loss, sums, maxima)

    def finalize(self, metrics: dict[str, float]) -> dict[str, float]:
        """Per-bucket sums (each divided by the step's targets) -> the mean KL at those positions; the rollouts'
        summed sequence gap over their count -> ``logprob_gap_seq_mean``."""
        out = {k: v for k, v in metrics.items() if not k.startswith(("kl_at/", "tokens_at/", "logprob_gap_seq/"))}
        for b in range(BUCKETS):
            tokens = metrics.get(f"tokens_at/{b:02d}", 0.0)
            if tokens > 0:
                out[f"kl_at_position/{bucket_label(b)}"] = metrics[f"kl_at/{b:02d}"] / tokens
        if metrics.get("logprob_gap_seq/rollouts", 0.0) > 0:
            out["logprob_gap_seq_mean"] = metrics["logprob_gap_seq/sum"] / metrics["logprob_gap_seq/rollouts"]
        return out


def logprob_gap_terms(log_q: torch.Tensor, sampled: torch.Tensor, mask: torch.Tensor
                      ) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """The sampling-vs-training log-prob gap of a micro-batch as the loop's sums and maxima.

    ``log_q [N]``: the training forward's log-probs of the target tokens (``mask``'s positions, row-major);
    ``sampled [B, T-1]``: the sampler's log-prob of the token at t+1, at position t; ``mask [B, T-1]``. The sums
    are divided by the step's targets (so ``logprob_gap_mean`` is per sampled token), and
    ``logprob_gap_seq/sum`` and ``/rollouts`` by the same count, so :meth:`OnPolicyDistillation.finalize` takes
    their ratio."""
    delta = log_q.float() - sampled[mask].float()
    per_row = delta.new_zeros(mask.shape[0]).index_add(0, mask.nonzero()[:, 0], delta).abs()  # 0 without targets
    absolute = delta.abs()
    sums = {"logprob_gap_mean": absolute.sum(), "logprob_gap_seq/sum": per_row.sum(),
            "logprob_gap_seq/rollouts": mask.any(-1).sum().to(delta.dtype)}
    maxima = {"logprob_gap_max": absolute.max() if absolute.numel() else delta.new_zeros(()),
              "logprob_gap_seq_max": per_row.max()}
    return sums, maxima
