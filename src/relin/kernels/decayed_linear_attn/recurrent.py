"""Token-by-token decayed linear attention, for decoding (T small, state carried between calls).

S_t = exp(g_t) S_{t-1} + k_t v_tᵀ, o_t = scale · S_tᵀ q_t (notes/chunked-algorithms.md §1). The Triton
kernel keeps one [K, BV] state tile in registers per (sequence, head, V-block) and is forward-only; when
a gradient is needed, or on CPU by default, the same recurrence runs in PyTorch under autograd.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import use_triton
from ..common.chunk_tables import chunk_tables
from .ref import check_inputs, default_scale, pack_normalizer, per_sequence, unpack_normalizer


@triton.jit
def fused_recurrent_fwd_kernel(q, k, v, g, o, h0, ht, cu_seqlens, scale,
                               H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr,
                               BV: tl.constexpr, USE_G: tl.constexpr, USE_H0: tl.constexpr,
                               STORE_HT: tl.constexpr):
    i_nh, i_v = tl.program_id(0), tl.program_id(1)
    i_n, i_h = i_nh // H, i_nh % H
    bos, eos = tl.load(cu_seqlens + i_n), tl.load(cu_seqlens + i_n + 1)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    o_kv = o_k[:, None] * V + o_v[None, :]
    m_kv = m_k[:, None] & m_v[None, :]
    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + tl.cast(i_nh, tl.int64) * K * V + o_kv, mask=m_kv, other=0.).to(tl.float32)
    for t in range(0, eos - bos):
        p_t = (bos + tl.cast(t, tl.int64)) * H + i_h
        b_q = tl.load(q + p_t * K + o_k, mask=m_k, other=0.).to(tl.float32)
        b_k = tl.load(k + p_t * K + o_k, mask=m_k, other=0.).to(tl.float32)
        b_v = tl.load(v + p_t * V + o_v, mask=m_v, other=0.).to(tl.float32)
        if USE_G:
            b_h *= tl.exp(tl.load(g + p_t).to(tl.float32))
        b_h += b_k[:, None] * b_v[None, :]
        b_o = tl.sum(b_h * b_q[:, None], axis=0) * scale
        tl.store(o + p_t * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if STORE_HT:
        tl.store(ht + tl.cast(i_nh, tl.int64) * K * V + o_kv, b_h, mask=m_kv)


def _triton_recurrent(q, k, v, g, scale, initial_state, output_final_state, bounds, out_dtype):
    B, T, H, K = q.shape
    V = v.shape[-1]
    tables = chunk_tables(B, T, bounds, q.device)
    N = tables.num_seqs
    q, k, v = (x.reshape(1, B * T, H, -1).contiguous() for x in (q, k, v))
    g = g.reshape(1, B * T, H).contiguous() if g is not None else None
    h0 = initial_state.float().contiguous() if initial_state is not None else None
    o = torch.empty(1, B * T, H, V, dtype=out_dtype, device=q.device)
    ht = torch.empty(N, H, K, V, dtype=torch.float32, device=q.device) if output_final_state else None
    BK, BV = triton.next_power_of_2(K), min(32, triton.next_power_of_2(V))
    fused_recurrent_fwd_kernel[(N * H, triton.cdiv(V, BV))](
        q, k, v, g, o, h0, ht, tables.cu_seqlens, scale, H=H, K=K, V=V, BK=BK, BV=BV,
        USE_G=g is not None, USE_H0=h0 is not None, STORE_HT=output_final_state)
    return o.reshape(B, T, H, V), ht


def _torch_recurrent_one(q, k, v, g, scale, S):
    """q, k [B, T, H, K], v [B, T, H, V], g [B, T, H] or None, S [B, H, K, V] fp32."""
    outputs = []
    for t in range(q.shape[1]):
        if g is not None:
            S = g[:, t].float().exp()[..., None, None] * S
        S = S + k[:, t].float()[..., :, None] * v[:, t].float()[..., None, :]
        outputs.append(torch.einsum("bhk,bhkv->bhv", q[:, t].float(), S) * scale)
    return torch.stack(outputs, dim=1), S


def _torch_recurrent(q, k, v, g, scale, initial_state, output_final_state, bounds, out_dtype):
    H, K, V = q.shape[2], q.shape[3], v.shape[3]

    def one(q, k, v, g, S):
        S = S.float() if S is not None else q.new_zeros(q.shape[0], H, K, V, dtype=torch.float32)
        return _torch_recurrent_one(q, k, v, g, scale, S)

    o, S = per_sequence(one, q, k, v, g, initial_state, bounds)
    return o.to(out_dtype), (S if output_final_state else None)


def fused_recurrent_decayed_linear_attn(q, k, v, g=None, scale=None, normalize=False, initial_state=None,
                                        output_final_state=False, cu_seqlens=None, backend=None):
    """Same arguments, shapes and returns as ``chunk_decayed_linear_attn``; cost linear in T per token.

    Runs the Triton kernel (forward only) when the backend selects Triton and no input needs a gradient.
    Normalized, the op runs on v' = [v, 1] (``ref.pack_normalizer``) and divides afterwards.
    """
    bounds = check_inputs(q, k, v, g, initial_state, normalize, cu_seqlens)
    k, v = k.to(q.dtype), v.to(q.dtype)
    scale = default_scale(q, scale, normalize)
    out_dtype = torch.float32 if normalize else q.dtype
    if normalize:
        v, initial_state = pack_normalizer(v, initial_state)
    tensors = [x for x in (q, k, v, g, initial_state) if x is not None]
    needs_grad = torch.is_grad_enabled() and any(x.requires_grad for x in tensors)
    core = _triton_recurrent if use_triton(q, backend) and not needs_grad else _torch_recurrent
    o, final_state = core(q, k, v, g, scale, initial_state, output_final_state, bounds, out_dtype)
    if normalize:
        o, final_state = unpack_normalizer(o, final_state, q.dtype)
    return o, final_state
