"""``attention_match``: stage 1 of HedgeMamba (seeds/001 §3.1), Hedgehog's attention transfer. Each Hedgehog
layer of the student runs on the hidden states its teacher attention layer received (the teacher frozen, so
every layer learns on the teacher's inputs) and is compared with it by one of three named losses:

- ``attention_ce``: soft-label cross-entropy of the teacher's attention rows A against the Hedgehog rows Â,
  −Σ_j A_ij log Â_ij per query, mean over heads (Hedgehog, arXiv 2402.04347);
- ``output_mse``: mean over features of (y − y_T)² per position of the layer output (LoLCATs);
- ``cosine``: 1 − cos(y, y_T) per position (the HedgeMamba paper's summaries).

A = softmax(q_rot k_rotᵀ / √D) with the causal mask comes from the Hedgehog layer's own q/k projections,
which are frozen copies of the teacher's (the GPT-NeoX block test shows they reproduce it); Â_ij =
φ(q_i)·φ(k_j) / Σ_{j'≤i} φ(q_i)·φ(k_j'). Rows are formed a block of ``query_block`` queries at a time under
activation checkpointing, so a layer holds O(block · T) scores, never T × T. Whatever the loss, the KL(A‖Â)
per layer is logged with it (``attn_kl/layerN``, and the loss as ``match_loss/layerN``). Targets are real
positions × matched layers.
"""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ...errors import ConfigError
from ..teacher import FrozenTeacher
from .base import Objective, ObjectiveOutput, register

LOSSES = ("attention_ce", "output_mse", "cosine")
LOG_EPS = 1e-12


def _row_block(q_rot, k_rot, fq, fk, real, start: int):
    """Soft-label CE and KL(A‖Â) per query of one block, mean over heads: ``[B, Q]`` each.

    ``q_rot, fq`` cover queries ``start .. start+Q`` (``[B, Q, H, D]``, ``[B, Q, H, F]``), ``k_rot, fk`` all keys."""
    steps, block = k_rot.shape[1], q_rot.shape[1]
    queries = torch.arange(start, start + block, device=real.device)
    allowed = (torch.arange(steps, device=real.device)[None, :] <= queries[:, None])[None] & real[:, None, :]
    allowed |= torch.arange(steps, device=real.device)[None, None, :] == queries[None, :, None]   # no empty row
    allowed = allowed[:, None]                                                                     # [B, 1, Q, T]
    logits = torch.einsum("bihd,bjhd->bhij", q_rot.float(), k_rot.float()) * q_rot.shape[-1] ** -0.5
    log_a = logits.masked_fill(~allowed, float("-inf")).log_softmax(-1)
    a = log_a.exp()
    scores = torch.einsum("bihf,bjhf->bhij", fq.float(), fk.float()) * allowed
    log_a_hat = (scores / (scores.sum(-1, keepdim=True) + LOG_EPS)).clamp_min(LOG_EPS).log()
    ce = -(a * log_a_hat).sum(-1)
    kl = torch.where(allowed, a * (log_a.clamp_min(-1e30) - log_a_hat), 0.0).sum(-1)
    return ce.mean(1), kl.mean(1)


def attention_row_losses(layer, hidden_states: torch.Tensor, rope, real: torch.Tensor, query_block: int
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per position ``[B, T]``: the soft-label CE (differentiable in φ) and the KL(A‖Â) of a Hedgehog layer
    (:class:`~relin.layers.hedgehog.HedgehogAttention`) on ``hidden_states [B, T, C]``."""
    q, k, _, q_rot, k_rot = layer.projections(hidden_states, rope)
    fq, fk = layer.features(q, k, q_rot, k_rot, real)
    ces, kls = [], []
    for start in range(0, q.shape[1], query_block):
        end = start + query_block
        ce, kl = checkpoint(_row_block, q_rot[:, start:end], k_rot, fq[:, start:end], fk, real.bool(), start,
                            use_reentrant=False)
        ces.append(ce)
        kls.append(kl)
    return torch.cat(ces, 1), torch.cat(kls, 1)


@register
class AttentionMatch(Objective):
    """Hedgehog attention transfer of named student layers to the teacher's attention layers.

    Args:
        teacher (FrozenTeacher): the frozen teacher.
        layers (dict[str, str]): student Hedgehog module name -> teacher attention module name, in layer order.
        loss (str): one of :data:`LOSSES`. Default: ``attention_ce``.
        query_block (int): queries per block of attention rows. Default: 64.
    """

    name = "attention_match"

    def __init__(self, teacher: FrozenTeacher, layers: dict[str, str],
                 loss: Literal["attention_ce", "output_mse", "cosine"] = "attention_ce", query_block: int = 64):
        if not layers:
            raise ConfigError("attention_match.layers: expected at least one Hedgehog layer")
        if loss not in LOSSES:
            raise ConfigError(f"attention_match.loss: unknown {loss!r} (expected one of: {', '.join(LOSSES)})")
        if query_block < 1:
            raise ConfigError(f"attention_match.query_block: expected >= 1, got {query_block}")
        self.pairs, self.teacher, self.loss, self.query_block = dict(layers), teacher, loss, query_block
        teacher.capture(self.pairs.values())

    def frozen_modules(self):
        return [self.teacher.module]

    def count_targets(self, batch):
        return int(batch["attention_mask"].sum()) * len(self.pairs)

    def finalize(self, metrics):
        # per-layer sums were divided by positions × layers; each layer's own mean is over positions only
        return {k: v * len(self.pairs) if "/layer" in k else v for k, v in metrics.items()}

    def __call__(self, model, batch):
        reference = self.teacher(batch)
        mask = batch["attention_mask"]
        real = mask.bool()
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        loss = torch.zeros((), device=mask.device)
        sums = {}
        for i, (student_name, teacher_name) in enumerate(self.pairs.items()):
            layer, x = model.get_submodule(student_name), reference.inputs[teacher_name]
            rope = model.base_model.rotary(positions, x.dtype)
            ce, kl = attention_row_losses(layer, x, rope, real.to(x.dtype), self.query_block)
            if self.loss == "attention_ce":
                per_position = ce
            else:
                y, _ = layer(x, rope, mask)
                y, y_t = y.float(), reference.outputs[teacher_name].float()
                per_position = (((y - y_t) ** 2).mean(-1) if self.loss == "output_mse"
                                else 1 - F.cosine_similarity(y, y_t, dim=-1))
            layer_loss = per_position[real].sum()
            loss = loss + layer_loss
            sums[f"match_loss/layer{i}"] = layer_loss.detach()
            sums[f"attn_kl/layer{i}"] = kl.detach()[real].sum()
        return ObjectiveOutput(loss, sums)
