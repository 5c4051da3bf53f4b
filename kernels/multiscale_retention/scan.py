"""Scan over T-block boundary states in PyTorch (differentiable; the chunked CPU path uses it).

Within a block the recurrence runs from a given start state; across blocks the start states
obey H_{n+1} = λ^{len_n} H_n + E_n with E_n the block's end state from a zero start
(notes/chunked-algorithms.md §3). That first-order linear recurrence is solved here in
ceil(log2 N) vectorised steps (Hillis-Steele), so no Python loop runs over the N blocks.
The Triton path's version of the same scan is ``block_scan.py``.
"""
from __future__ import annotations

import torch


def linear_scan(decay: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """y_n = decay_n * y_{n-1} + x_n along dim 1 with y_{-1} = 0.

    x: [B, N, S, C]; decay: broadcastable to x with its own size along dim 1 ([1, N, S, 1]).
    """
    n, step = x.shape[1], 1
    while step < n:
        x = torch.cat([x[:, :step], x[:, step:] + decay[:, step:] * x[:, :-step]], 1)
        decay = torch.cat([decay[:, :step], decay[:, step:] * decay[:, :-step]], 1)
        step *= 2
    return x


def block_start_states(block_decay: torch.Tensor, block_end: torch.Tensor,
                       initial_state: torch.Tensor | None) -> torch.Tensor:
    """States entering each block, [B, N, S, C].

    block_decay: [N, S], λ_s to the power of each block's length; block_end: [B, N, S, C], each
    block's end state from a zero start; initial_state: [B, S, C] or None (zeros).
    """
    decay = block_decay[None, :, :, None]
    if initial_state is not None:
        block_end = torch.cat([block_end[:, :1] + decay[:, :1] * initial_state[:, None], block_end[:, 1:]], 1)
    ends = linear_scan(decay, block_end)
    first = initial_state[:, None] if initial_state is not None else torch.zeros_like(ends[:, :1])
    return torch.cat([first, ends[:, :-1]], 1)
