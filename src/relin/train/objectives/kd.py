"""``kd``: distillation of a frozen teacher's next-token distribution, the vocabulary in chunks.

Three divergences per target position t, with student q = softmax(s_t / τ) and teacher
p = softmax(u_t / τ) over the whole vocabulary:

- ``forward_kl``: KL(p ‖ q) = Σ_v p_v (log p_v − log q_v)  (MambaInLlama, DistiLLM);
- ``reverse_kl``: KL(q ‖ p) = Σ_v q_v (log q_v − log p_v)  (on-policy distillation, TRL GKD β = 1);
- ``reverse_kl_sampled``: the estimator r_t = log q(y_t) − log p(y_t) of the reverse KL at the
  token y_t the batch holds, with loss sg(r_t)·log q(y_t), whose gradient equals the reverse KL's in
  expectation when y_t is drawn from q (Tinker's on-policy recipe); its logged ``kl`` is Σ r_t.

Logits never exist for the whole sequence at once: the last hidden states of student and teacher
are projected through their output heads ``chunk_size`` positions at a time, each chunk under
activation checkpointing (recomputed in the backward pass), so peak memory grows with
``chunk_size × vocab`` instead of ``T × vocab``.
"""
from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from ..teacher import FrozenTeacher
from .base import Objective, ObjectiveOutput, next_token_mask, register

Divergence = Literal["forward_kl", "reverse_kl", "reverse_kl_sampled"]
DIVERGENCES = ("forward_kl", "reverse_kl", "reverse_kl_sampled")


def divergence_sum(student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                   kind: Divergence) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss_sum, kl [N])`` over positions of ``[N, V]`` logits (fp32): the summed loss and each
    position's (estimated) KL, detached. ``targets [N]`` are the tokens the batch holds (used by the
    sampled estimator only)."""
    return divergence_terms(student_logits, teacher_logits, targets, kind)[:2]


def divergence_terms(student_logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                     kind: Divergence) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`divergence_sum` and, third, the student's log-prob of each target ``log q(y_t) [N]``, detached
    (read from the log-softmax the divergence computes anyway)."""
    log_q = F.log_softmax(student_logits.float(), -1)
    log_p = F.log_softmax(teacher_logits.float(), -1)
    log_q_y = log_q.gather(-1, targets[:, None]).squeeze(-1)
    if kind == "forward_kl":
        kl = (log_p.exp() * (log_p - log_q)).sum(-1)
        return kl.sum(), kl.detach(), log_q_y.detach()
    if kind == "reverse_kl":
        kl = (log_q.exp() * (log_q - log_p)).sum(-1)
        return kl.sum(), kl.detach(), log_q_y.detach()
    if kind == "reverse_kl_sampled":
        ratio = (log_q_y - log_p.gather(-1, targets[:, None]).squeeze(-1)).detach()
        return (ratio * log_q_y).sum(), ratio, log_q_y.detach()
    raise ValueError(f"divergence: expected one of {', '.join(DIVERGENCES)}, got {kind!r}")


def chunked_divergence(student_hidden: torch.Tensor, teacher_hidden: torch.Tensor, student_head: torch.nn.Module,
                       teacher_head: torch.nn.Module, targets: torch.Tensor, kind: Divergence,
                       temperature: float = 1.0, chunk_size: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`divergence_sum` of ``head(hidden) / temperature`` for ``[N, H]`` hidden states, computed
    ``chunk_size`` rows at a time with checkpointing (no ``[N, V]`` tensor is ever kept)."""
    return chunked_divergence_terms(student_hidden, teacher_hidden, student_head, teacher_head, targets, kind,
                                    temperature, chunk_size)[:2]


def chunked_divergence_terms(student_hidden: torch.Tensor, teacher_hidden: torch.Tensor, student_head: torch.nn.Module,
                             teacher_head: torch.nn.Module, targets: torch.Tensor, kind: Divergence,
                             temperature: float = 1.0, chunk_size: int = 1024
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`chunked_divergence` and the student's log-prob of each target (:func:`divergence_terms`)."""
    def chunk(h_s, h_t, y):
        with torch.no_grad():
            teacher_logits = teacher_head(h_t).float() / temperature
        return divergence_terms(student_head(h_s).float() / temperature, teacher_logits, y, kind)

    loss, kls, log_qs = student_hidden.new_zeros((), dtype=torch.float32), [], []
    for start in range(0, student_hidden.shape[0], chunk_size):
        rows = slice(start, start + chunk_size)
        part_loss, part_kl, part_log_q = checkpoint(chunk, student_hidden[rows], teacher_hidden[rows], targets[rows],
                                                    use_reentrant=False)
        loss, kls, log_qs = loss + part_loss, kls + [part_kl], log_qs + [part_log_q]
    empty = loss.new_zeros(0)
    return loss, torch.cat(kls) if kls else empty, torch.cat(log_qs) if log_qs else empty


@register
class Distillation(Objective):
    """Logit distillation against a :class:`~relin.train.teacher.FrozenTeacher`.

    Args:
        teacher (FrozenTeacher): the frozen teacher (shared with other objectives of the step).
        divergence (str): ``forward_kl``, ``reverse_kl`` or ``reverse_kl_sampled``. Default: ``forward_kl``.
        temperature (float): logits are divided by it on both sides. Default: 1.
        positions (str): ``all`` real next tokens (off-policy text) or ``labels`` (e.g. sampled
            completions of on-policy rollouts). Default: ``all``.
        chunk_size (int): positions projected to the vocabulary at a time. Default: 1024.
    """

    name = "kd"

    def __init__(self, teacher: FrozenTeacher, divergence: Divergence = "forward_kl", temperature: float = 1.0,
                 positions: str = "all", chunk_size: int = 1024):
        if divergence not in DIVERGENCES:
            from ...errors import ConfigError

            raise ConfigError(f"divergence: expected one of {', '.join(DIVERGENCES)}, got {divergence!r}")
        self.teacher, self.divergence, self.temperature = teacher, divergence, temperature
        self.positions, self.chunk_size = positions, chunk_size
        self.requires = ("input_ids", "attention_mask", *(("labels",) if positions == "labels" else ()))

    def frozen_modules(self):
        return [self.teacher.module]

    def count_targets(self, batch):
        return int(next_token_mask(batch, self.positions).sum())

    def per_position(self, model, batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(loss_sum, kl [N], log_q [N], mask [B, T-1])`` over the target positions; ``log_q`` is the student's
        log-prob (at the temperature) of each target token, detached."""
        mask = next_token_mask(batch, self.positions)
        student = model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        hidden_s = student.last_hidden_state[:, :-1][mask]
        hidden_t = self.teacher(batch).hidden[:, :-1][mask]
        targets = batch["input_ids"][:, 1:][mask]
        loss, kl, log_q = chunked_divergence_terms(hidden_s, hidden_t, model.get_output_embeddings(),
                                                   self.teacher.head, targets, self.divergence, self.temperature,
                                                   self.chunk_size)
        return loss, kl, log_q, mask

    def __call__(self, model, batch):
        loss, kl, _, _ = self.per_position(model, batch)
        return ObjectiveOutput(loss, {"kl": kl.sum()})
