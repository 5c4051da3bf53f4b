"""Normalisations: RMSNorm (computed in fp32, as Qwen3's) and Gated DeltaNet's gated RMSNorm.

They run :func:`relin.kernels.fused_norm`: at inference (no gradient needed) one pass per row on a GPU, rather than
the half-dozen elementwise launches of the PyTorch expression; with gradients, the kernel's fp32 reference (the same
math), which autograd differentiates."""
from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """``weight · x / sqrt(mean(x²) + eps)`` over the last dimension, in fp32 (Qwen3RMSNorm's numerics)."""

    def __init__(self, width: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(width))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from relin.kernels.fused_norm import rms_norm

        return rms_norm(x, self.weight, self.eps)

    def add_and_norm(self, x: torch.Tensor, residual: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The pre-norm block's ``residual + x`` and its norm, in one pass at inference. Returns ``(normed, sum)``."""
        from relin.kernels.fused_norm import rms_norm

        if x.shape != residual.shape:                          # broadcasting: the add first, then the norm
            summed = residual + x
            return self(summed), summed
        return rms_norm(x, self.weight, self.eps, residual=residual)


class GatedRMSNorm(RMSNorm):
    """``RMSNorm(o) · SiLU(gate)`` per head (fla's ``FusedRMSNormGated``; Qwen3-Next's output norm)."""

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        from relin.kernels.fused_norm import rms_norm

        return rms_norm(x, self.weight, self.eps, gate=gate)
