"""Depthwise causal 1-D convolution over time with a carried state (the short convolution of Gated
DeltaNet and Mamba): ``y_t = act(Σ_i w_i · x_{t-K+1+i})``, one filter per channel."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class ShortConvolution(nn.Module):
    """Args: channels (int), kernel_size (int), activation (str): ``silu`` or ``none``.

    Initialised to the identity filter (the last tap 1, the rest 0), so a converted layer starts from
    its projections' values rather than from noise.
    """

    def __init__(self, channels: int, kernel_size: int = 4, activation: str = "silu"):
        super().__init__()
        if activation not in ("silu", "none"):
            raise ValueError(f"activation: expected 'silu' or 'none', got {activation!r}")
        self.weight = nn.Parameter(torch.zeros(channels, kernel_size))
        with torch.no_grad():
            self.weight[:, -1] = 1.0
        self.activation = activation

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [B, T, C]``, ``state [B, C, K-1]`` (the previous inputs, zeros at the start).
        Returns ``y [B, T, C]`` and the new state."""
        width = self.weight.shape[1]
        x = x.transpose(1, 2)
        if state is None:
            state = x.new_zeros(x.shape[0], x.shape[1], width - 1)
        padded = torch.cat([state.to(x.dtype), x], dim=-1)
        y = F.conv1d(padded, self.weight[:, None, :].to(x.dtype), groups=x.shape[1])
        if self.activation == "silu":
            y = F.silu(y)
        return y.transpose(1, 2), padded[..., padded.shape[-1] - (width - 1):]
