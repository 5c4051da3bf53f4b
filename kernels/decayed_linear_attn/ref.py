"""fp32 per-token reference for decayed linear attention (the oracle every fast path is tested against).

Recurrence (notes/chunked-algorithms.md §1): the SSM mixer of the HedgeMamba paper (seeds/001, eq. 2,
with a scalar decay per head as in Mamba-2/SSD), which is its linear attention (eq. 4) when g is None;
the normalized form is its eqs. 9-10:

    S_t = exp(g_t) S_{t-1} + k_t v_tᵀ          o_t = scale · S_tᵀ q_t
    normalize=True:  z_t = exp(g_t) z_{t-1} + k_t,   o_t = S_tᵀ q_t / (q_t·z_t + 1e-6)
"""
from __future__ import annotations

import torch

NORMALIZER_EPS = 1e-6


def naive_recurrent_decayed_linear_attn(q, k, v, g=None, scale=None, normalize=False, initial_state=None,
                                        output_final_state=False):
    """One token at a time in fp32.

    q, k: [B, T, H, K]; v: [B, T, H, V]; g: [B, T, H] log decay or None (no decay).
    initial_state: S [B, H, K, V], or the pair (S, z [B, H, K]) when ``normalize``.
    Returns o [B, T, H, V] in q's dtype and the final state (same structure as initial_state) or None.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    dtype = q.dtype
    scale = 1.0 if normalize else (K ** -0.5 if scale is None else scale)
    q, k, v = q.float(), k.float(), v.float()
    S = q.new_zeros(B, H, K, V)
    z = q.new_zeros(B, H, K)
    if initial_state is not None:
        S0, z0 = initial_state if normalize else (initial_state, None)
        S = S + S0.float()
        if normalize:
            z = z + z0.float()
    outputs = []
    for t in range(T):
        if g is not None:
            decay = g[:, t].float().exp()  # [B, H]
            S = decay[..., None, None] * S
            z = decay[..., None] * z
        S = S + k[:, t, :, :, None] * v[:, t, :, None, :]
        z = z + k[:, t]
        o_t = torch.einsum("bhk,bhkv->bhv", q[:, t], S) * scale
        if normalize:
            o_t = o_t / ((q[:, t] * z).sum(-1, keepdim=True) + NORMALIZER_EPS)
        outputs.append(o_t)
    o = torch.stack(outputs, dim=1) if outputs else q.new_zeros(B, 0, H, V)
    final_state = ((S, z) if normalize else S) if output_final_state else None
    return o.to(dtype), final_state
