"""One GEMM for several bias-free projections of the same input at inference, when their weights are frozen.

At a decode step each projection is a skinny GEMM whose cost is mostly its launch and a weight read at low
occupancy; stacked row-wise they make one launch over one weight. The stack is a copy, kept beside the module
(not a parameter: checkpoints, optimisers and ZeRO's flattened buffers never see it) and taken again whenever a
weight has changed since (another tensor, or the same one written in place: its version counter moved).

Only frozen weights (``requires_grad`` False: a model loaded for inference and frozen, a distillation teacher)
are stacked. Weights that train keep one GEMM each: a captured CUDA graph (OPAL's rollouts) replays its kernels
on the tensors it was captured with, so it must read the parameters themselves, which the optimizer updates in
place, not a copy taken before.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def version(tensor: torch.Tensor) -> int:
    """The in-place write counter (-1 for an inference tensor, which has none and cannot be written outside
    inference mode)."""
    try:
        return tensor._version
    except RuntimeError:
        return -1


def signature(modules: list[nn.Module]) -> tuple:
    return tuple((m.weight.data_ptr(), version(m.weight), m.weight.dtype, m.weight.device) for m in modules)


def frozen(modules: list[nn.Module]) -> bool:
    return not any(m.weight.requires_grad for m in modules)


@torch.no_grad()
def stacked_weight(owner: nn.Module, names: tuple[str, ...]) -> torch.Tensor:
    """``[Σ out, ...]``: the weights of ``owner``'s bias-free submodules ``names`` (linears, short convolutions)
    stacked in that order. Frozen weights: the stack kept beside ``owner`` (taken on first use, again after any of
    them changes). Trainable weights: stacked anew at each call (inside a captured graph, at each replay)."""
    modules = [getattr(owner, name) for name in names]
    if any(getattr(m, "bias", None) is not None for m in modules):
        raise ValueError(f"stacked_weight: {', '.join(names)} must be bias-free")
    if not frozen(modules):
        return torch.cat([m.weight for m in modules])
    key = "_stacked_" + "_".join(names)
    cached = owner.__dict__.get(key)
    current = signature(modules)
    if cached is not None and cached[0] == current:
        return cached[1]
    stacked = torch.cat([m.weight.detach() for m in modules])
    owner.__dict__[key] = (current, stacked)
    return stacked


def stacked_projection(owner: nn.Module, names: tuple[str, ...], x: torch.Tensor) -> torch.Tensor:
    """``[..., Σ out]``: the bias-free linears ``names`` of ``owner`` applied to ``x [..., in]``, their outputs side
    by side; one GEMM over the stacked weights when they are frozen, else one per projection."""
    modules = [getattr(owner, name) for name in names]
    if frozen(modules):
        return F.linear(x, stacked_weight(owner, names))
    return torch.cat([m(x) for m in modules], dim=-1)
