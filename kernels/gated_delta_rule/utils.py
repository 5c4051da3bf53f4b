"""Argument checks and small tensor helpers shared by the gated delta rule paths."""
from __future__ import annotations

import torch

L2NORM_EPS = 1e-6


def l2norm(x: torch.Tensor) -> torch.Tensor:
    """``x / sqrt(sum(x^2) + 1e-6)`` along the last dim, in fp32 (fla's ``l2norm``)."""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + L2NORM_EPS)


def check_inputs(q, k, v, g, beta, initial_state, cu_seqlens) -> int:
    """Validate shapes of a gated delta rule call; return the number of sequences N."""
    if q.dim() != 4 or k.shape != q.shape:
        raise ValueError(f"q and k must both be [B, T, H, K]; got {tuple(q.shape)} and {tuple(k.shape)}")
    B, T, H, _ = q.shape
    if v.dim() != 4 or v.shape[:3] != (B, T, H):
        raise ValueError(f"v must be [B, T, H, V] = [{B}, {T}, {H}, V]; got {tuple(v.shape)}")
    for name, x in (("g", g), ("beta", beta)):
        if x.shape != (B, T, H):
            raise ValueError(f"{name} must be [B, T, H] = [{B}, {T}, {H}]; got {tuple(x.shape)}")
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"with cu_seqlens the batch size must be 1 (sequences packed along T); got B={B}")
        if cu_seqlens.dim() != 1 or cu_seqlens.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"cu_seqlens must be a 1-D integer tensor [N+1]; got {cu_seqlens.dtype} {tuple(cu_seqlens.shape)}")
        bounds = cu_seqlens.tolist()
        if bounds[0] != 0 or bounds[-1] != T or any(b > a for a, b in zip(bounds[1:], bounds[:-1])):
            raise ValueError(f"cu_seqlens must rise from 0 to T={T}; got {bounds}")
        N = len(bounds) - 1
    else:
        N = B
    if initial_state is not None and initial_state.shape != (N, H, q.shape[-1], v.shape[-1]):
        raise ValueError(
            f"initial_state must be [N, H, K, V] = [{N}, {H}, {q.shape[-1]}, {v.shape[-1]}]; "
            f"got {tuple(initial_state.shape)}")
    return N
