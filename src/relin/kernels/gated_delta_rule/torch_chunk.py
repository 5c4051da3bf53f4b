"""Chunked PyTorch form of the gated delta rule (notes/chunked-algorithms.md §2; the WY form of Yang et al. 2024,
arXiv 2406.06484).

Per chunk of C positions with b = in-chunk cumsum of g, gamma = exp(b), R_ij = exp(b_i - b_j):
    M = I + tril_{-1}(diag(beta) (R * K K^T)),  W = M^{-1} diag(beta gamma) K,  U = M^{-1} diag(beta) V,
    delta = U - W S_0,  O = scale (diag(gamma) Q S_0 + tril(R * Q K^T) delta),
    S_C = gamma_C S_0 + (diag(gamma_C / gamma) K)^T delta.
Differentiable by autograd; the CPU path of the public ops and the oracle for the Triton pieces.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.chunk_tables import CHUNK_SIZE


def _chunk_sequence(q, k, v, g, beta, scale, state, chunk):
    """One sequence, all heads. q, k: [T, H, K]; v: [T, H, V]; g, beta: [T, H]; state: [H, K, V]."""
    T = q.shape[0]
    pad = (-T) % chunk
    # Zero k, v, g and beta make padded steps the identity on the state.
    q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x, (0, 0, 0, pad)) for x in (g, beta))
    n = (T + pad) // chunk
    # [H, n, C, D] layout: heads and chunks batch the intra-chunk matmuls.
    q, k, v = (x.reshape(n, chunk, *x.shape[1:]).permute(2, 0, 1, 3) for x in (q, k, v))
    g, beta = (x.reshape(n, chunk, -1).permute(2, 0, 1) for x in (g, beta))
    b = g.cumsum(-1)
    diff = b[..., :, None] - b[..., None, :]
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    strict = lower.tril(-1)
    # Mask before exp: above the diagonal b_i - b_j is positive and may overflow.
    R = torch.where(lower, diff, -torch.inf).exp()
    A = torch.where(strict, beta[..., :, None] * R * (k @ k.transpose(-1, -2)), 0.0)
    eye = torch.eye(chunk, dtype=q.dtype, device=q.device)
    gamma = b.exp()
    rhs = torch.cat([(beta * gamma)[..., None] * k, beta[..., None] * v], -1)
    WU = torch.linalg.solve_triangular(eye + A, rhs, upper=False, unitriangular=True)
    W, U = WU.split([k.shape[-1], v.shape[-1]], -1)
    P = torch.where(lower, R * (q @ k.transpose(-1, -2)), 0.0)
    decay_to_end = (b[..., -1:] - b).exp()
    outputs = []
    for c in range(n):
        delta = U[:, c] - W[:, c] @ state
        outputs.append(scale * (gamma[:, c, :, None] * (q[:, c] @ state) + P[:, c] @ delta))
        state = gamma[:, c, -1, None, None] * state + (decay_to_end[:, c, :, None] * k[:, c]).transpose(-1, -2) @ delta
    o = torch.stack(outputs, 1).reshape(q.shape[0], n * chunk, -1).transpose(0, 1)
    return o[:T], state


def torch_chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, bounds, chunk: int = CHUNK_SIZE):
    """Chunked gated delta rule on already-normalised inputs, in fp32.

    Args:
        q, k: [B, T, H, K]. v: [B, T, H, V]. g, beta: [B, T, H]. initial_state: [N, H, K, V] or None.
        bounds: the sequence offsets [N+1] of packed input (B = 1) as a list, or None (then N = B).
    Returns:
        o [B, T, H, V] fp32 and the final states [N, H, K, V] fp32.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    if bounds is None:
        # Equal lengths: sequences become extra heads, so the chunk loop runs once for the batch.
        state = q.new_zeros(B * H, K, V) if initial_state is None else initial_state.float().reshape(B * H, K, V)
        q, k, v, g, beta = (x.transpose(0, 1).reshape(T, B * H, *x.shape[3:]) for x in (q, k, v, g, beta))
        o, state = _chunk_sequence(q, k, v, g, beta, scale, state, chunk)
        return o.reshape(T, B, H, V).transpose(0, 1), state.reshape(B, H, K, V)
    outputs, finals = [], []
    for n in range(len(bounds) - 1):
        s, e = bounds[n], bounds[n + 1]
        state = q.new_zeros(H, K, V) if initial_state is None else initial_state[n].float()
        o, state = _chunk_sequence(q[0, s:e], k[0, s:e], v[0, s:e], g[0, s:e], beta[0, s:e], scale, state, chunk)
        outputs.append(o)
        finals.append(state)
    return torch.cat(outputs)[None], torch.stack(finals)
