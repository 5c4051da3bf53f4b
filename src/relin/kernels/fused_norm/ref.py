"""fp32 reference of the RMSNorm family that the decoder blocks use, and the argument contract every path checks.

Over the last dimension D, in fp32, with Qwen3's roundings (the normalised value is cast back to the input's dtype
before the weight multiplies it):

    y = w · cast(x / sqrt(mean(x²) + eps))                          (RMSNorm)
    s = cast(residual + x),  y = w · cast(s / sqrt(mean(s²) + eps))  (with ``residual``: the block's add, then its norm)
    y = cast(w · cast(x / sqrt(mean(x²) + eps))) · SiLU(gate)       (with ``gate``: Gated DeltaNet's output norm)
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def check_inputs(x: torch.Tensor, weight: torch.Tensor, residual: torch.Tensor | None,
                 gate: torch.Tensor | None) -> None:
    """Validate an rms_norm call: one ValueError line naming the argument."""
    if weight.dim() != 1 or weight.shape[0] != x.shape[-1]:
        raise ValueError(f"weight must be [D] = [{x.shape[-1]}]; got {tuple(weight.shape)}")
    for name, other in (("residual", residual), ("gate", gate)):
        if other is not None and other.shape != x.shape:
            raise ValueError(f"{name} must have x's shape {tuple(x.shape)}; got {tuple(other.shape)}")
    if residual is not None and gate is not None:
        raise ValueError("rms_norm takes a residual or a gate, not both")


def naive_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None,
                   gate: torch.Tensor | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``x [..., D]``, ``weight [D]``, ``residual`` / ``gate`` like x. Returns ``y`` (like x, in the promoted dtype
    of x and weight), and with ``residual`` also the sum ``residual + x`` that was normalised (the block's new
    residual stream)."""
    check_inputs(x, weight, residual, gate)
    summed = None
    if residual is not None:
        x = summed = residual + x
    dtype = x.dtype
    normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    y = weight * normed.to(dtype)
    if gate is not None:
        y = (y.float() * F.silu(gate.float())).to(dtype)
    return y if summed is None else (y, summed)
