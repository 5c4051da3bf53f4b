"""Argument checks and the normalizer packing shared by the chunked and recurrent entry points.

normalize=True runs the unnormalized op on v' = [v, 1] with scale 1 (the HedgeMamba paper's single pass
with V expanded by an all-one column, §3.2, eqs. 9-10): the extra value column carries
z_t = exp(g_t) z_{t-1} + k_t, so its output is the denominator q_t·z_t; the division happens in
autograd-visible PyTorch, which keeps its gradient exact.
"""
from __future__ import annotations

import torch

from .ref import NORMALIZER_EPS


def check_inputs(q, k, v, g, initial_state, normalize, cu_seqlens):
    """Raise one ValueError line naming the first malformed argument."""
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
    if g is not None and tuple(g.shape) != (B, T, H):
        raise ValueError(f"g must be the log decay [B, T, H] = {(B, T, H)}; got {tuple(g.shape)}")
    N = B
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"cu_seqlens needs packed input with B = 1; got B = {B}")
        if cu_seqlens.dim() != 1 or cu_seqlens.dtype not in (torch.int32, torch.int64) or len(cu_seqlens) < 2:
            raise ValueError(f"cu_seqlens must be an integer tensor [N+1]; got {cu_seqlens.dtype} {tuple(cu_seqlens.shape)}")
        if int(cu_seqlens[0]) != 0 or int(cu_seqlens[-1]) != T or bool((cu_seqlens.diff() < 0).any()):
            raise ValueError(f"cu_seqlens must rise from 0 to T = {T}; got {cu_seqlens.tolist()}")
        N = len(cu_seqlens) - 1
    if initial_state is None:
        return
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


def pack_normalizer(v, initial_state):
    """v [.., V] -> [v, 1] [.., V+1]; (S, z) -> [S, z] [N, H, K, V+1] fp32."""
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


def prepare(q, k, v, g, scale, normalize, initial_state, cu_seqlens):
    """Check the arguments and bring them to the unnormalized op's form (both entry points).

    Returns k, v in q's dtype (v packed as [v, 1] when normalizing), the scale, the initial state (packed
    [S, z] when normalizing) and the dtype of the op's raw output (fp32 when normalizing, for the division).
    """
    check_inputs(q, k, v, g, initial_state, normalize, cu_seqlens)
    k, v = k.to(q.dtype), v.to(q.dtype)
    if normalize:
        v, initial_state = pack_normalizer(v, initial_state)
        return k, v, 1.0, initial_state, torch.float32
    return k, v, float(q.shape[-1] ** -0.5 if scale is None else scale), initial_state, q.dtype


def per_sequence(op, q, k, v, g, initial_state, cu_seqlens):
    """``op(q, k, v, g, initial_state) -> (o, state)`` on the whole batch, or with ``cu_seqlens`` once per packed
    sequence (q, k, v, g sliced along T, the state row n), outputs concatenated along T and states along N."""
    if cu_seqlens is None:
        return op(q, k, v, g, initial_state)
    outputs, states = [], []
    bounds = cu_seqlens.tolist()
    for n, (bos, eos) in enumerate(zip(bounds[:-1], bounds[1:])):
        o_n, s_n = op(q[:, bos:eos], k[:, bos:eos], v[:, bos:eos], None if g is None else g[:, bos:eos],
                      None if initial_state is None else initial_state[n:n + 1])
        outputs.append(o_n)
        states.append(s_n)
    return torch.cat(outputs, dim=1), torch.cat(states)
