"""Decoding with the model's cache: greedy for evaluation, sampled for on-policy rollouts.

:func:`sample` works with any causal LM that follows the transformers 5 calling convention:
``model(input_ids, attention_mask, position_ids, cache=..., use_cache=True, logits_to_keep=...)``
returning ``.logits`` and its cache (a key/value cache for attention, a recurrent state for linear
layers), under the name the installed transformers gives it (:mod:`relin.models.cache_api`); it grows
the cache each step. :func:`token_loop` is the token loop it shares with
:class:`~relin.models.static_sampler.StaticSampler` (a relin hybrid's static cache and CUDA-graphed decode step).
With ``return_logprobs`` both also return each drawn token's log-probability under the model's own distribution
(the logits before temperature and top-p) on the decode path, which :mod:`relin.models.logprob_gap` compares with
the training forward's.
"""
from __future__ import annotations

import torch

from .cache_api import cache_kwargs, output_cache


@torch.no_grad()
def generate(model, input_ids: torch.Tensor, max_new_tokens: int, *,
             attention_mask: torch.Tensor | None = None, eos_token_id: int | None = None,
             pad_token_id: int | None = None) -> torch.Tensor:
    """Greedy continuation of left-padded prompts ``[B, T]``: the generated tokens ``[B, max_new_tokens]``
    (see :func:`sample`)."""
    return sample(model, input_ids, max_new_tokens, attention_mask=attention_mask, eos_token_id=eos_token_id,
                  pad_token_id=pad_token_id, temperature=0.0)


@torch.no_grad()
def sample(model, input_ids: torch.Tensor, max_new_tokens: int, *, attention_mask: torch.Tensor | None = None,
           eos_token_id: int | None = None, pad_token_id: int | None = None, temperature: float = 1.0,
           top_p: float = 1.0, generator: torch.Generator | None = None, return_logprobs: bool = False
           ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Continuation of left-padded prompts through the model's cache, one token per step.

    Args:
        input_ids (torch.LongTensor): prompts ``[B, T]``, left-padded when lengths differ.
        max_new_tokens (int): tokens to generate per prompt.
        attention_mask (torch.LongTensor, Optional): ``[B, T]``, 0 on padding. Default: all ones.
        eos_token_id (int, Optional): a sequence that produced it continues with ``pad_token_id``.
        pad_token_id (int, Optional): filler after eos. Default: ``eos_token_id``.
        temperature (float): 0 = greedy (argmax); otherwise logits / temperature are sampled. Default: 1.
        top_p (float): nucleus sampling: the smallest set of tokens with probability ≥ top_p. Default: 1.
        generator (torch.Generator, Optional): the sampling RNG (reproducible rollouts).
        return_logprobs (bool): also return each generated token's log-probability (see :func:`token_loop`).

    Returns:
        torch.LongTensor: the generated tokens only, ``[B, max_new_tokens]``; with ``return_logprobs``, a pair
        of them and their log-probabilities ``[B, max_new_tokens]`` (fp32).
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids: expected [B, T], got shape {list(input_ids.shape)}")
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    # Left padding shifts each row's real tokens; positions count real tokens only.
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                use_cache=True, logits_to_keep=1)
    state = {"cache": output_cache(out), "mask": attention_mask, "positions": position_ids}

    def step(token: torch.Tensor) -> torch.Tensor:
        state["mask"] = torch.cat([state["mask"], state["mask"].new_ones(state["mask"].shape[0], 1)], -1)
        state["positions"] = state["positions"][:, -1:] + 1
        out = model(input_ids=token[:, None], attention_mask=state["mask"], position_ids=state["positions"],
                    use_cache=True, **cache_kwargs(model, state["cache"]))
        state["cache"] = output_cache(out)
        return out.logits[:, -1]

    return token_loop(out.logits[:, -1], step, max_new_tokens, eos_token_id, pad_token_id, temperature, top_p,
                      generator, sync_every=1, return_logprobs=return_logprobs)


def token_loop(logits: torch.Tensor, step, max_new_tokens: int, eos_token_id: int | None, pad_token_id: int | None,
               temperature: float, top_p: float, generator: torch.Generator | None, sync_every: int,
               return_logprobs: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """The token loop both decoders share: draw from ``logits [B, V]``, then ``step(token [B])`` gives the
    next logits; rows past their eos get the pad. Returns ``[B, max_new_tokens]``; with ``return_logprobs``
    also each drawn token's log-probability under ``log_softmax(logits)`` (the model's distribution, before
    temperature and top-p), ``[B, max_new_tokens]`` fp32, 0 at the pad after a row's eos. It is read from the
    logits the draw used, before ``step`` replaces them: one log-softmax per step, no extra forward."""
    pad = eos_token_id if pad_token_id is None else pad_token_id
    finished = torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
    generated, logprobs = [], []
    for _ in range(max_new_tokens):
        token = next_token(logits, temperature, top_p, generator)
        if eos_token_id is not None:
            token = torch.where(finished, torch.full_like(token, pad), token)
        if return_logprobs:
            logprobs.append(token_logprobs(logits, token).masked_fill(finished, 0.0))
        if eos_token_id is not None:
            finished |= token == eos_token_id
        generated.append(token)
        if len(generated) == max_new_tokens:
            break
        if eos_token_id is not None and len(generated) % sync_every == 0 and bool(finished.all()):
            break
        logits = step(token)
    tokens = torch.stack(generated, dim=1)
    missing = max_new_tokens - tokens.shape[1]
    if missing:
        tokens = torch.cat([tokens, tokens.new_full((tokens.shape[0], missing), pad)], 1)
    if not return_logprobs:
        return tokens
    logprobs = torch.stack(logprobs, dim=1)
    return tokens, torch.cat([logprobs, logprobs.new_zeros(logprobs.shape[0], missing)], 1)


def token_logprobs(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """``log_softmax(logits)`` at ``tokens``: ``logits [..., V]``, ``tokens [...]`` -> ``[...]``, in fp32 or the
    logits' dtype where wider (fp64)."""
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return torch.log_softmax(logits, -1).gather(-1, tokens[..., None]).squeeze(-1)


def next_token(logits: torch.Tensor, temperature: float, top_p: float = 1.0,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """One token per row of ``logits [B, V]``: argmax at temperature 0, else a draw from the
    temperature-scaled distribution restricted to its top-p nucleus."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, -1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs >= top_p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
