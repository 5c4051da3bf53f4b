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


def prepare_chunks(cu_seqlens: torch.Tensor, chunk: int, device: torch.device):
    """Host-side chunk tables for packed sequences (pass ``cu_seqlens`` on the CPU to avoid a sync).

    Returns ``chunk_indices`` [NT, 2] int32 (sequence, chunk within it) for every chunk in packing
    order, and ``chunk_offsets`` [N+1] int64 (index of each sequence's first chunk), both on ``device``.
    """
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    counts = [-(-n // chunk) for n in lengths]
    indices = [(n, c) for n, count in enumerate(counts) for c in range(count)]
    offsets = [0]
    for count in counts:
        offsets.append(offsets[-1] + count)
    chunk_indices = torch.tensor(indices, dtype=torch.int32, device=device).reshape(-1, 2)
    chunk_offsets = torch.tensor(offsets, dtype=torch.int64, device=device)
    return chunk_indices, chunk_offsets


def equal_length_chunks(batch: int, seq_len: int, chunk: int, device: torch.device):
    """``cu_seqlens`` and the ``prepare_chunks`` tables for ``batch`` sequences of ``seq_len`` tokens, built
    on ``device`` by arange: no host-to-device copy, which would wait for the stream to drain."""
    count = -(-seq_len // chunk)
    sequences = torch.arange(batch + 1, dtype=torch.int64, device=device)
    chunk_indices = torch.stack((
        sequences[:-1].to(torch.int32).repeat_interleave(count),
        torch.arange(count, dtype=torch.int32, device=device).repeat(batch)), 1)
    return sequences * seq_len, chunk_indices, sequences * count
