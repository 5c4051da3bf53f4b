"""fp32 reference of one decoding step of a depthwise causal short convolution (Gated DeltaNet's and Mamba's),
and the argument contract every path checks.

Per channel c, with taps w[c, 0 … W-1] and the state holding the previous W-1 inputs (oldest first):

    y[c] = act(Σ_{i<W-1} w[c, i] · state[c, i] + w[c, W-1] · x[c]),   state ← (state[c, 1:], x[c])
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

ACTIVATIONS = ("silu", "none")


def check_inputs(x: torch.Tensor, state: torch.Tensor, weight: torch.Tensor, activation: str,
                 real: torch.Tensor | None) -> None:
    """Validate a short_conv_step call: one ValueError line naming the argument."""
    if x.dim() != 2:
        raise ValueError(f"x must be [B, C]; got {tuple(x.shape)}")
    B, C = x.shape
    if weight.dim() != 2 or weight.shape[0] != C or weight.shape[1] < 2:
        raise ValueError(f"weight must be [C, W] = [{C}, W ≥ 2]; got {tuple(weight.shape)}")
    if state.shape != (B, C, weight.shape[1] - 1):
        raise ValueError(f"state must be [B, C, W-1] = [{B}, {C}, {weight.shape[1] - 1}]; got {tuple(state.shape)}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {', '.join(ACTIVATIONS)}; got {activation!r}")
    if real is not None and real.shape != (B,):
        raise ValueError(f"real must be [B] = [{B}]; got {tuple(real.shape)}")


def naive_short_conv_step(x: torch.Tensor, state: torch.Tensor, weight: torch.Tensor, activation: str = "silu",
                          real: torch.Tensor | None = None) -> torch.Tensor:
    """``x [B, C]`` (this step's inputs), ``state [B, C, W-1]`` (updated in place), ``weight [C, W]``; ``real [B]``
    (0 = a padding step: its input counts as zero). Returns ``y [B, C]`` in x's dtype."""
    check_inputs(x, state, weight, activation, real)
    if real is not None:
        x = x * real[:, None].to(x.dtype)
    window = torch.cat([state.float(), x.float()[..., None]], dim=-1)           # [B, C, W]
    y = (window * weight.float()).sum(-1)
    if activation == "silu":
        y = F.silu(y)
    state.copy_(window[..., 1:])
    return y.to(x.dtype)
