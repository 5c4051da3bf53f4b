"""One GEMM for several bias-free projections of the same input at inference.

At a decode step each projection is a skinny GEMM whose cost is mostly its launch and a weight read at low
occupancy; stacked row-wise they make one launch over one weight. The stack is a copy, kept beside the module
(not a parameter: checkpoints, optimisers and ZeRO's flattened buffers never see it) and rebuilt whenever a weight
has changed since it was taken: another tensor, or the same one written in place (its version counter moved).
"""
from __future__ import annotations

import torch
from torch import nn


def version(tensor: torch.Tensor) -> int:
    """The in-place write counter (-1 for an inference tensor, which has none and cannot be written outside
    inference mode)."""
    try:
        return tensor._version
    except RuntimeError:
        return -1


def signature(linears: list[nn.Module]) -> tuple:
    return tuple((linear.weight.data_ptr(), version(linear.weight), linear.weight.dtype, linear.weight.device)
                 for linear in linears)


@torch.no_grad()
def stacked_weight(owner: nn.Module, names: tuple[str, ...]) -> torch.Tensor:
    """``[Σ out, in]``: the weights of ``owner``'s bias-free submodules ``names`` (linears, short convolutions)
    stacked in that order (taken on first use, retaken after any of them changes; a captured CUDA graph keeps
    reading the stack it was captured with)."""
    linears = [getattr(owner, name) for name in names]
    key = "_stacked_" + "_".join(names)
    cached = owner.__dict__.get(key)
    current = signature(linears)
    if cached is not None and cached[0] == current:
        return cached[1]
    if any(getattr(linear, "bias", None) is not None for linear in linears):
        raise ValueError(f"stacked_weight: {', '.join(names)} must be bias-free")
    stacked = torch.cat([linear.weight.detach() for linear in linears])
    owner.__dict__[key] = (current, stacked)
    return stacked
