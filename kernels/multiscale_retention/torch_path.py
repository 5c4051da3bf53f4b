"""Chunked PyTorch path of multi-timescale diagonal retention (LIA-MTR, eqs. 3-5), used on CPU.

Tokens are grouped into blocks of L. Inside a block the S scales fold into one causal [L, L]
matrix A_{ij} = Σ_s mix_{i,s} λ_s^{i-j}, so o = q ⊙ (A u + Σ_s mix_s λ_s^{i+1} H_s) never forms
the [B, T, S, C] tensor of all memories; the block start states H come from ``scan.py``.
Gradients come from autograd through these ops.
"""
from __future__ import annotations

import torch

from .scan import block_start_states


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
                                      output_final_state=False, block_len=64):
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
