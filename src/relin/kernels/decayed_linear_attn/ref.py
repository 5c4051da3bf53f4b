"""fp32 per-token reference for decayed linear attention (the oracle every fast path is tested against), and the
argument contract of the public ops.

Recurrence (notes/chunked-algorithms.md §1): the SSM mixer of the HedgeMamba paper (seeds/001, eq. 2,
with a scalar decay per head as in Mamba-2/SSD), which is its linear attention (eq. 4) when g is None;
the normalized form is its eqs. 9-10:

    S_t = exp(g_t) S_{t-1} + k_t v_tᵀ          o_t = scale · S_tᵀ q_t
    normalize=True:  z_t = exp(g_t) z_{t-1} + k_t,   o_t = S_tᵀ q_t / (q_t·z_t + 1e-6)
"""
from __future__ import annotations

import torch

from ..common.chunk_tables import sequence_bounds

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


def check_inputs(q, k, v, g, initial_state, normalize, cu_seqlens) -> list[int] | None:
    """Raise one ValueError line naming the first malformed argument; return the sequence offsets of packed input
    as a list (None without ``cu_seqlens``)."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be [B, T, H, D]; got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape != k.shape or v.shape[:3] != q.shape[:3]:
        raise ValueError(f"q and k must be [B, T, H, K] and v [B, T, H, V] with equal B, T, H; "
                         f"got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}")
    if not (q.is_floating_point() and k.is_floating_point() and v.is_floating_point()):
        raise ValueError(f"q, k, v must be floating point; got {q.dtype}, {k.dtype}, {v.dtype}")
    B, T, H, K = q.shape
    V = v.shape[-1]
    if T == 0:
        raise ValueError("q, k, v have T = 0 tokens; expected at least one")
    if K == 0 or V == 0:
        raise ValueError(f"head dims K = {K}, V = {V}: expected at least 1")
    if g is not None and tuple(g.shape) != (B, T, H):
        raise ValueError(f"g must be the log decay [B, T, H] = {(B, T, H)}; got {tuple(g.shape)}")
    bounds = sequence_bounds(cu_seqlens, T, B)
    N = B if bounds is None else len(bounds) - 1
    if initial_state is None:
        return bounds
    if normalize:
        if not (isinstance(initial_state, (tuple, list)) and len(initial_state) == 2):
            raise ValueError("with normalize=True, initial_state must be the pair (S [N, H, K, V], z [N, H, K])")
        S0, z0 = initial_state
        if tuple(z0.shape) != (N, H, K):
            raise ValueError(f"initial normalizer z must be [N, H, K] = {(N, H, K)}; got {tuple(z0.shape)}")
    else:
        S0 = initial_state
        if not isinstance(S0, torch.Tensor):
            raise ValueError("with normalize=False, initial_state must be one tensor S [N, H, K, V]")
    if tuple(S0.shape) != (N, H, K, V):
        raise ValueError(f"initial state S must be [N, H, K, V] = {(N, H, K, V)}; got {tuple(S0.shape)}")
    return bounds


def default_scale(q, scale, normalize) -> float:
    """The scale of q·k: K^-0.5 unless given; 1 when normalized (the division cancels any scale)."""
    if normalize:
        return 1.0
    return float(q.shape[-1] ** -0.5 if scale is None else scale)


def pack_normalizer(v, initial_state):
    """The PyTorch paths' normalized form: the unnormalized op on v' = [v, 1] [.., V+1] (the HedgeMamba paper's
    single pass with V expanded by an all-one column, §3.2, eqs. 9-10), whose last output column is the
    denominator q_t·z_t; (S, z) -> [S, z] [N, H, K, V+1] fp32."""
    v = torch.cat([v, v.new_ones(*v.shape[:-1], 1)], dim=-1)
    if initial_state is not None:
        S0, z0 = initial_state
        initial_state = torch.cat([S0.float(), z0.float()[..., None]], dim=-1)
    return v, initial_state


def unpack_normalizer(o, final_state, dtype):
    """o [.., V+1] fp32 -> numerator / (denominator + eps) in dtype; state -> (S, z)."""
    o = (o[..., :-1] / (o[..., -1:] + NORMALIZER_EPS)).to(dtype)
    if final_state is not None:
        final_state = (final_state[..., :-1], final_state[..., -1])
    return o, final_state


def per_sequence(op, q, k, v, g, initial_state, bounds):
    """``op(q, k, v, g, initial_state) -> (o, state)`` on the whole batch, or with ``bounds`` (packed sequence
    offsets) once per sequence (q, k, v, g sliced along T, the state row n), outputs concatenated along T and
    states along N."""
    if bounds is None:
        return op(q, k, v, g, initial_state)
    outputs, states = [], []
    for n, (bos, eos) in enumerate(zip(bounds[:-1], bounds[1:])):
        o_n, s_n = op(q[:, bos:eos], k[:, bos:eos], v[:, bos:eos], None if g is None else g[:, bos:eos],
                      None if initial_state is None else initial_state[n:n + 1])
        outputs.append(o_n)
        states.append(s_n)
    return torch.cat(outputs, dim=1), torch.cat(states)
