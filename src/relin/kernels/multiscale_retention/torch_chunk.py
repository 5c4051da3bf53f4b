"""Chunked PyTorch path of multi-timescale diagonal retention (LIA-MTR, eqs. 3-5), used on CPU.

Tokens are grouped into blocks of L. Inside a block the S scales fold into one causal [L, L]
matrix A_{ij} = Σ_s mix_{i,s} λ_s^{i-j}, so o = q ⊙ (A u + Σ_s mix_s λ_s^{i+1} H_s) never forms
the [B, T, S, C] tensor of all memories. Across blocks the start states obey H_{n+1} = λ^{len_n} H_n + E_n
with E_n a block's end state from a zero start (notes/chunked-algorithms.md §3), a first-order linear recurrence
solved in ceil(log2 N) vectorised steps (Hillis-Steele), so no Python loop runs over the N blocks.
Gradients come from autograd through these ops.
"""
from __future__ import annotations

import torch

from ..common.chunk_tables import CHUNK_SIZE


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


def _full_blocks(q, u, mix, log_decays, initial_state, block_len):
    """Blocks of exactly ``block_len`` tokens; T must be a multiple of it. Returns o, final state."""
    B, T, C = q.shape
    S = mix.shape[-1]
    n = T // block_len
    q, u, mix = q.view(B, n, block_len, C), u.view(B, n, block_len, C), mix.view(B, n, block_len, S)
    pos = torch.arange(block_len, device=q.device)
    lag = pos[:, None] - pos[None, :]
    causal_decay = torch.where((lag >= 0)[..., None], torch.exp(log_decays * lag.clamp_min(0)[..., None]), 0.0)
    intra = torch.einsum("bnis,ijs->bnij", mix, causal_decay) @ u
    to_end = torch.exp(log_decays * (block_len - 1 - pos)[:, None])
    block_end = torch.einsum("js,bnjc->bnsc", to_end, u)
    block_decay = torch.exp(log_decays * block_len).expand(n, S)
    start = block_start_states(block_decay, block_end, initial_state)
    from_start = mix * torch.exp(log_decays * (pos + 1)[:, None])
    inter = torch.einsum("bnls,bnsc->bnlc", from_start, start)
    final = block_decay[-1][:, None] * start[:, -1] + block_end[:, -1]
    return (q * (intra + inter)).view(B, T, C), final


def chunked_multiscale_diag_retention(q, k, v, gate, mix, log_decays, initial_state=None,
                                      output_final_state=False, block_len=CHUNK_SIZE):
    """Same contract as ``multiscale_diag_retention``; fp32 inside, o returned in q's dtype."""
    T = q.shape[1]
    q32, mix32, log_decays = q.float(), mix.float(), log_decays.float()
    u = gate.float() * k.float() * v.float()
    state = None if initial_state is None else initial_state.float()
    whole = T - T % block_len
    pieces = []
    for lo, hi, length in ((0, whole, block_len), (whole, T, T - whole)):
        if hi > lo:
            o, state = _full_blocks(q32[:, lo:hi], u[:, lo:hi], mix32[:, lo:hi], log_decays, state, length)
            pieces.append(o)
    o = torch.cat(pieces, 1).to(q.dtype)
    return o, (state if output_final_state else None)
