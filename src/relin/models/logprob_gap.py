"""The log-prob gap between the sampling path and the training path of a rollout.

A rollout is sampled through the model's cache (:func:`~relin.models.generation.sample`): the prompt in one
prefill, then one token per step, which for a Gated DeltaNet layer is the recurrent kernel
(:func:`relin.kernels.fused_recurrent_gated_delta_rule`). Training reads the same tokens teacher-forced in one
forward over prompt + rollout, which is the chunk kernel (:func:`relin.kernels.chunk_gated_delta_rule`). The two
compute the same function in a different order of operations (and, on a GPU, possibly under a different autocast),
so the log-probabilities the sampler drew each token with and the ones the loss differentiates differ by rounding;
on-policy distillation assumes they agree.

:func:`rollout_logprob_gap` recomputes a rollout's log-probs with the training forward and compares them with the
sampler's (``sample(..., return_logprobs=True)``); :func:`gap_statistics` turns the two into the numbers logged:
the mean and max of ``|Δ log p|`` over generated tokens and ``|Σ_t Δ log p_t|`` per rollout (the sequence log-prob
gap, what an importance weight between the two paths would be). OPAL stage 3 logs the same statistics per step
from its loss's own forward (:class:`~relin.train.objectives.OnPolicyDistillation`), without a second forward.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .generation import token_logprobs


@dataclass
class LogprobGap:
    """``Δ = log p_train − log p_sample`` over the generated tokens of a batch of rollouts.

    Attributes:
        mean (float): mean ``|Δ|`` per generated token.
        max (float): max ``|Δ|``.
        seq (torch.Tensor): ``|Σ_t Δ_t|`` per rollout ``[B]`` (the sequence-level log-prob gap).
        tokens (int): the generated tokens compared (up to and including each row's eos).
    """

    mean: float
    max: float
    seq: torch.Tensor
    tokens: int

    @property
    def seq_mean(self) -> float:
        return float(self.seq.mean()) if self.seq.numel() else 0.0

    @property
    def seq_max(self) -> float:
        return float(self.seq.max()) if self.seq.numel() else 0.0


def generated_mask(tokens: torch.Tensor, eos_token_id: int | None) -> torch.Tensor:
    """``[B, N]`` bool: the generated tokens a rollout keeps, up to and including its first eos (the rest is
    the sampler's padding), as :class:`~relin.train.rollouts.OnPolicyRollouts` puts targets on them."""
    if eos_token_id is None:
        return torch.ones_like(tokens, dtype=torch.bool)
    eos = (tokens == eos_token_id).long()
    return (eos.cumsum(-1) - eos) == 0


def gap_statistics(sampled: torch.Tensor, recomputed: torch.Tensor, mask: torch.Tensor) -> LogprobGap:
    """:class:`LogprobGap` of ``recomputed − sampled`` log-probs ``[B, N]`` at the ``mask [B, N]`` positions."""
    delta = (recomputed.detach().double() - sampled.detach().double()) * mask
    absolute = delta.abs()[mask]
    tokens = int(mask.sum())
    seq = delta.sum(-1).abs()[mask.any(-1)]
    return LogprobGap(mean=float(absolute.sum()) / max(tokens, 1), max=float(absolute.max()) if tokens else 0.0,
                      seq=seq.float(), tokens=tokens)


@torch.no_grad()
def teacher_forced_logprobs(model, input_ids: torch.Tensor, new_tokens: torch.Tensor,
                            attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The log-probs of ``new_tokens [B, N]`` after left-padded prompts ``input_ids [B, T]`` from one forward
    over prompt + continuation (the training path: every position at once, no cache), ``[B, N]`` fp32."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    ids = torch.cat([input_ids, new_tokens], 1)
    mask = torch.cat([attention_mask, torch.ones_like(new_tokens)], 1)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)  # as sample() counts them: real tokens only
    steps = new_tokens.shape[1]
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions,
                   logits_to_keep=steps + 1).logits[:, -steps - 1:-1]
    return token_logprobs(logits, new_tokens)


def rollout_logprob_gap(model, input_ids: torch.Tensor, new_tokens: torch.Tensor, sampled_logprobs: torch.Tensor,
                        attention_mask: torch.Tensor | None = None, eos_token_id: int | None = None) -> LogprobGap:
    """The gap between the log-probs a rollout was sampled with and the training forward's.

    Args:
        model: the causal LM that sampled the rollout (same parameters).
        input_ids (torch.LongTensor): the left-padded prompts ``[B, T]`` it continued.
        new_tokens (torch.LongTensor): its continuation ``[B, N]`` (``sample``'s tokens).
        sampled_logprobs (torch.Tensor): their log-probs on the sampling path ``[B, N]``
            (``sample(..., return_logprobs=True)``).
        attention_mask (torch.LongTensor, Optional): the prompts' ``[B, T]``, 0 on padding.
        eos_token_id (int, Optional): tokens after a row's first eos are not compared.
    """
    recomputed = teacher_forced_logprobs(model, input_ids, new_tokens, attention_mask)
    return gap_statistics(sampled_logprobs.to(recomputed.device), recomputed, generated_mask(new_tokens, eos_token_id))
