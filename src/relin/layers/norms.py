"""Normalisations: RMSNorm (computed in fp32, as Qwen3's) and Gated DeltaNet's gated RMSNorm."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class RMSNorm(nn.Module):
    """``weight · x / sqrt(mean(x²) + eps)`` over the last dimension, in fp32 (Qwen3RMSNorm's numerics)."""

    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class GatedRMSNorm(RMSNorm):
    """``RMSNorm(o) · SiLU(gate)`` per head (fla's ``FusedRMSNormGated``; Qwen3-Next's output norm)."""

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return (super().forward(x).float() * F.silu(gate.float())).to(x.dtype)
