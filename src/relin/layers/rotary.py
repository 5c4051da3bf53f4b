"""Rotary position embeddings (RoPE, Su et al. 2021) as Qwen3 and GPT-NeoX apply them: the first
``rotary_dim`` features of each head rotate (all of them in Qwen3, ``rotary_pct`` in GPT-NeoX),
halves paired (``rotate_half``)."""
from __future__ import annotations

import torch
from torch import nn


class RotaryEmbedding(nn.Module):
    """``(cos, sin)`` of shape ``[B, T, rotary_dim]`` for integer positions ``[B, T]``.

    The frequencies are computed per call, not held in a buffer: a non-persistent buffer is not
    restored by ``from_pretrained`` (which builds the model on the meta device)."""

    def __init__(self, rotary_dim: int, theta: float):
        super().__init__()
        self.rotary_dim, self.theta = rotary_dim, theta

    @torch.no_grad()
    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        exponents = torch.arange(0, self.rotary_dim, 2, dtype=torch.int64, device=positions.device).float()
        inv_freq = 1.0 / (self.theta ** (exponents / self.rotary_dim))
        freqs = positions[..., None].float() * inv_freq
        angles = torch.cat([freqs, freqs], dim=-1)
        return angles.cos().to(dtype), angles.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``cos.shape[-1]`` features of ``x [B, H, T, D]`` (``cos, sin [B, T, R]``)."""
    rotary = cos.shape[-1]
    cos, sin = cos[:, None], sin[:, None]
    turned = x[..., :rotary] * cos + rotate_half(x[..., :rotary]) * sin
    return turned if rotary == x.shape[-1] else torch.cat([turned, x[..., rotary:]], dim=-1)
