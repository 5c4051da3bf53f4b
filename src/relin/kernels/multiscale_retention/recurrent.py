"""One-token step of multi-timescale diagonal retention for decoding (LIA-MTR, eqs. 3-5)."""
from __future__ import annotations

import torch


def multiscale_diag_retention_step(q, k, v, gate, mix, log_decays, state=None):
    """Advance the S per-channel memories by one token.

    q, k, v: [B, C]; gate: [B, C] or [B, 1]; mix: [B, S]; log_decays: [S]; state: [B, S, C] fp32
    (None: zeros). Returns o [B, C] in q's dtype and the new state [B, S, C] fp32.
    """
    if q.dim() != 2 or mix.dim() != 2:
        raise ValueError(f"step expects q [B, C] and mix [B, S], got q {tuple(q.shape)}, mix {tuple(mix.shape)}")
    B, C = q.shape
    S = mix.shape[-1]
    if state is None:
        state = q.new_zeros(B, S, C, dtype=torch.float32)
    if state.shape != (B, S, C):
        raise ValueError(f"state has shape {tuple(state.shape)}, expected [B, S, C] = {(B, S, C)}")
    u = gate.float() * k.float() * v.float()
    state = log_decays.float().exp()[:, None] * state.float() + u[:, None, :]
    o = q.float() * torch.einsum("bs,bsc->bc", mix.float(), state)
    return o.to(q.dtype), state
