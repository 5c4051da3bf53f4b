"""Triton backward of decayed linear attention, in fla's chunk_bwd_dh / chunk_bwd_dv / chunk_bwd_dqk split.

Per chunk, with h = state entering the chunk, dh = gradient of the state leaving it, b the in-chunk
cumulative log decay and R_ij = e^{b_i - b_j} on the causal triangle (notes/chunked-algorithms.md §1):
    dQ = scale · (e^b dO hᵀ + (R ⊙ dO Vᵀ) K)
    dK = scale · (R ⊙ dO Vᵀ)ᵀ Q + e^{b_C - b} V dhᵀ
    dV = scale · (R ⊙ Q Kᵀ)ᵀ dO + e^{b_C - b} K dh
    dh_prev = e^{b_C} dh + scale · (e^b Q)ᵀ dO          (the reverse serial pass)
The decay gradient is taken per chunk, as in fla's chunk_simple_gla: dL/db_t = q_t·dq_t − k_t·dk_t, and the
chunk's last token also gains dL/db_C through the state it hands on, <dh, S_end> = e^{b_C} <h, dh> + Σ_j k_j·dk_j^inter
(dk^inter = e^{b_C - b} V dhᵀ); dg is the reverse cumulative sum of dL/db inside the chunk. Summing globally
instead (adding <S_T, dS_T> at the end of the sequence) cancels terms of size |S_T|·|dS_T| that were rounded
differently (tf32 dh in dk, exact S_T): with no initial state, dg at the first token is 0 exactly but came out
~0.3 at T = 1 with K = 256. Here −k_j·dk_j^inter and the +Σ_j at the chunk's end are the same fp32 numbers.
As in the forward, dh is stored in the input dtype and products of other computed tiles take fp32
operands unless LOW_OPERANDS (see ``triton_fwd``'s policy).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.interpreter_dot import mma
from ..common.triton_utils import autotune
from . import triton_fwd
from .triton_fwd import CHUNK_SIZE, block_size, dot_args, operand, value_tile

_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w, s in ((4, 2), (8, 2), (4, 3))]


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G"])
@triton.jit
def chunk_bwd_dh_kernel(q, do, gc, dh, dht, dh0, cu_seqlens, chunk_offsets, scale,
                        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        BK: tl.constexpr, BV: tl.constexpr, USE_G: tl.constexpr, USE_DHT: tl.constexpr,
                        STORE_DH0: tl.constexpr, DOT_PRECISION: tl.constexpr, DOT_WIDEN: tl.constexpr,
                        LOW: tl.constexpr):
    i_nh, i_k, i_v = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_h = i_nh // H, i_nh % H
    bos, eos = tl.load(cu_seqlens + i_n), tl.load(cu_seqlens + i_n + 1)
    T = eos - bos
    NT = tl.cdiv(T, BT)
    boh = tl.load(chunk_offsets + i_n)

    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    o_kv = o_k[:, None] * V + o_v[None, :]
    m_kv = m_k[:, None] & m_v[None, :]

    b_dh = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_DHT:
        b_dh += tl.load(dht + tl.cast(i_nh, tl.int64) * K * V + o_kv, mask=m_kv, other=0.).to(tl.float32)
    for i_r in range(0, NT):
        i_t = tl.cast(NT - 1 - i_r, tl.int64)
        tl.store(dh + ((boh + i_t) * H + i_h) * K * V + o_kv, b_dh.to(dh.dtype.element_ty), mask=m_kv)
        o_t = i_t * BT + tl.arange(0, BT)
        m_t = o_t < T
        b_qt = tl.load(q + ((bos + o_t[None, :]) * H + i_h) * K + o_k[:, None],
                       mask=m_k[:, None] & m_t[None, :], other=0.)
        b_do = tl.load(do + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :],
                       mask=m_t[:, None] & m_v[None, :], other=0.)
        if USE_G:
            last = tl.minimum(i_t * BT + BT, T) - 1
            b_g_last = tl.load(gc + (bos + last) * H + i_h)
            b_g = tl.load(gc + (bos + o_t) * H + i_h, mask=m_t, other=0.)
            b_dh *= tl.exp(b_g_last)
            b_qt = b_qt * tl.where(m_t, tl.exp(b_g), 0.)[None, :] * scale
        else:
            b_qt = b_qt.to(tl.float32) * scale
        b_dh += mma(operand(b_qt, b_do, LOW), operand(b_do, b_do, LOW), DOT_PRECISION, DOT_WIDEN)
    if STORE_DH0:
        tl.store(dh0 + tl.cast(i_nh, tl.int64) * K * V + o_kv, b_dh, mask=m_kv)


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G"])
@triton.jit
def chunk_bwd_dv_kernel(q, k, do, gc, dh, dv, cu_seqlens, chunk_indices, scale,
                        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                        BK: tl.constexpr, BV: tl.constexpr, USE_G: tl.constexpr, DOT_PRECISION: tl.constexpr,
                        DOT_WIDEN: tl.constexpr, LOW: tl.constexpr):
    i_c, i_v, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n = tl.load(chunk_indices + i_c * 2)
    i_t = tl.cast(tl.load(chunk_indices + i_c * 2 + 1), tl.int64)
    bos, eos = tl.load(cu_seqlens + i_n), tl.load(cu_seqlens + i_n + 1)
    T = eos - bos
    o_i = tl.arange(0, BT)
    o_t = i_t * BT + o_i
    m_t = o_t < T
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    p_dh = dh + (tl.cast(i_c, tl.int64) * H + i_h) * K * V

    b_dv = tl.zeros([BT, BV], dtype=tl.float32)
    b_At = tl.zeros([BT, BT], dtype=tl.float32)  # At[j, i] = k_j · q_i
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = tl.cast(i_k, tl.int64) * BK + tl.arange(0, BK)
        m_k = o_k < K
        b_k = tl.load(k + ((bos + o_t[:, None]) * H + i_h) * K + o_k[None, :],
                      mask=m_t[:, None] & m_k[None, :], other=0.)
        b_qt = tl.load(q + ((bos + o_t[None, :]) * H + i_h) * K + o_k[:, None],
                       mask=m_k[:, None] & m_t[None, :], other=0.)
        b_dh = tl.load(p_dh + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.)
        b_At += mma(b_k, b_qt, DOT_PRECISION, DOT_WIDEN)
        b_dv += mma(b_k.to(b_dh.dtype), b_dh, DOT_PRECISION, DOT_WIDEN)

    m_A = (o_i[:, None] <= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    if USE_G:
        last = tl.minimum(i_t * BT + BT, T) - 1
        b_g_last = tl.load(gc + (bos + last) * H + i_h)
        b_g = tl.load(gc + (bos + o_t) * H + i_h, mask=m_t, other=0.)
        b_dv *= tl.where(m_t, tl.exp(b_g_last - b_g), 0.)[:, None]
        b_At = tl.where(m_A, b_At * tl.exp(tl.where(m_A, b_g[None, :] - b_g[:, None], 0.)), 0.)
    else:
        b_At = tl.where(m_A, b_At, 0.)
    b_do = tl.load(do + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :],
                   mask=m_t[:, None] & m_v[None, :], other=0.)
    b_dv += mma(operand(b_At * scale, b_do, LOW), operand(b_do, b_do, LOW), DOT_PRECISION, DOT_WIDEN)
    tl.store(dv + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :], b_dv.to(dv.dtype.element_ty),
             mask=m_t[:, None] & m_v[None, :])


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G"])
@triton.jit(do_not_specialize=["TOTAL"])
def chunk_bwd_dqk_kernel(q, k, v, do, gc, h, dh, dq, dk, db_partial, cu_seqlens, chunk_indices, scale, TOTAL,
                         H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                         BK: tl.constexpr, BV: tl.constexpr, USE_G: tl.constexpr, DOT_PRECISION: tl.constexpr,
                         DOT_WIDEN: tl.constexpr, LOW: tl.constexpr):
    i_c, i_k, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n = tl.load(chunk_indices + i_c * 2)
    i_t = tl.cast(tl.load(chunk_indices + i_c * 2 + 1), tl.int64)
    bos, eos = tl.load(cu_seqlens + i_n), tl.load(cu_seqlens + i_n + 1)
    T = eos - bos
    o_i = tl.arange(0, BT)
    o_t = i_t * BT + o_i
    m_t = o_t < T
    o_k = i_k * BK + tl.arange(0, BK)
    m_k = o_k < K
    m_tk = m_t[:, None] & m_k[None, :]
    o_state = (tl.cast(i_c, tl.int64) * H + i_h) * K * V

    b_dq = tl.zeros([BT, BK], dtype=tl.float32)
    b_dk = tl.zeros([BT, BK], dtype=tl.float32)
    b_ds = tl.zeros([BT, BT], dtype=tl.float32)  # ds[i, j] = do_i · v_j
    b_dst = tl.zeros([BT, BT], dtype=tl.float32)  # dsᵀ, its own product: see the note at dk_intra
    b_hdh = tl.zeros([BK], dtype=tl.float32)  # Σ_v h ⊙ dh, for <h, dh>
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = tl.cast(i_v, tl.int64) * BV + tl.arange(0, BV)
        m_v = o_v < V
        m_tv = m_t[:, None] & m_v[None, :]
        b_v = tl.load(v + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :], mask=m_tv, other=0.)
        b_do = tl.load(do + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :], mask=m_tv, other=0.)
        # states loaded transposed, [BV, BK]
        o_vk = o_v[:, None] + o_k[None, :] * V
        m_vk = m_v[:, None] & m_k[None, :]
        b_h_vk = tl.load(h + o_state + o_vk, mask=m_vk, other=0.)
        b_dh_vk = tl.load(dh + o_state + o_vk, mask=m_vk, other=0.)
        b_ds += mma(b_do, tl.trans(b_v), DOT_PRECISION, DOT_WIDEN)
        b_dst += mma(b_v, tl.trans(b_do), DOT_PRECISION, DOT_WIDEN)
        b_dq += mma(b_do.to(b_h_vk.dtype), b_h_vk, DOT_PRECISION, DOT_WIDEN)
        b_dk += mma(b_v.to(b_dh_vk.dtype), b_dh_vk, DOT_PRECISION, DOT_WIDEN)
        if USE_G:
            b_hdh += tl.sum(b_h_vk.to(tl.float32) * b_dh_vk.to(tl.float32), axis=0)

    b_q = tl.load(q + ((bos + o_t[:, None]) * H + i_h) * K + o_k[None, :], mask=m_tk, other=0.)
    b_k = tl.load(k + ((bos + o_t[:, None]) * H + i_h) * K + o_k[None, :], mask=m_tk, other=0.)
    m_A = (o_i[:, None] >= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    m_At = (o_i[:, None] <= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    if USE_G:
        last = tl.minimum(i_t * BT + BT, T) - 1
        b_g_last = tl.load(gc + (bos + last) * H + i_h)
        b_g = tl.load(gc + (bos + o_t) * H + i_h, mask=m_t, other=0.)
        b_dq *= tl.where(m_t, tl.exp(b_g), 0.)[:, None]
        b_dk *= tl.where(m_t, tl.exp(b_g_last - b_g), 0.)[:, None]
        b_ds = tl.where(m_A, b_ds * tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], 0.)), 0.)
        b_dst = tl.where(m_At, b_dst * tl.exp(tl.where(m_At, b_g[None, :] - b_g[:, None], 0.)), 0.)
    else:
        b_ds = tl.where(m_A, b_ds, 0.)
        b_dst = tl.where(m_At, b_dst, 0.)
    b_dq = b_dq * scale + mma(operand(b_ds * scale, b_k, LOW), operand(b_k, b_k, LOW), DOT_PRECISION, DOT_WIDEN)
    # dsᵀ is a product of its own rather than tl.trans(ds): Triton 3.4-3.7.0 miscompiles on Hopper the transpose
    # of a dot output used as a 16-bit dot operand (fla issue #640). With LOW, dq here was 63-118% off at
    # K = 20, V = 36 on the H200 whether ds was transposed before or after rounding; with dsᵀ, dq is right and
    # dk still fails there, so LOW needs 64-wide K tiles (triton_fwd.LOW_OPERANDS_MIN_K).
    b_dk_intra = mma(operand(b_dst * scale, b_q, LOW), operand(b_q, b_q, LOW), DOT_PRECISION, DOT_WIDEN)
    p_out = ((bos + o_t[:, None]) * H + i_h) * K + o_k[None, :]
    tl.store(dq + p_out, b_dq.to(dq.dtype.element_ty), mask=m_tk)
    tl.store(dk + p_out, (b_dk + b_dk_intra).to(dk.dtype.element_ty), mask=m_tk)
    if USE_G:
        b_kdk_inter = tl.sum(b_k.to(tl.float32) * b_dk, axis=1)
        b_db = tl.sum(b_q.to(tl.float32) * b_dq, axis=1) - tl.sum(b_k.to(tl.float32) * b_dk_intra, axis=1) - b_kdk_inter
        b_db_end = tl.exp(b_g_last) * tl.sum(b_hdh, axis=0) + tl.sum(b_kdk_inter, axis=0)
        b_db = tl.where(o_t == last, b_db + b_db_end, b_db)
        tl.store(db_partial + (tl.cast(i_k, tl.int64) * TOTAL + bos + o_t) * H + i_h, b_db, mask=m_t)


@triton.jit(do_not_specialize=["TOTAL"])
def chunk_local_reverse_cumsum_kernel(db_partial, dg, cu_seqlens, chunk_indices, TOTAL, H: tl.constexpr,
                                      BT: tl.constexpr, NK: tl.constexpr):
    """dg_t = Σ over the NK partials and over u ≥ t in t's chunk of dL/db_u."""
    i_c, i_h = tl.program_id(0), tl.program_id(1)
    i_n = tl.load(chunk_indices + i_c * 2)
    i_t = tl.cast(tl.load(chunk_indices + i_c * 2 + 1), tl.int64)
    bos, eos = tl.load(cu_seqlens + i_n), tl.load(cu_seqlens + i_n + 1)
    o_t = i_t * BT + tl.arange(0, BT)
    m_t = o_t < eos - bos
    b_db = tl.zeros([BT], dtype=tl.float32)
    for i_k in range(0, NK):
        b_db += tl.load(db_partial + (i_k * TOTAL + bos + o_t) * H + i_h, mask=m_t, other=0.)
    tl.store(dg + (bos + o_t) * H + i_h, tl.cumsum(b_db, axis=0, reverse=True), mask=m_t)


def chunk_bwd_dh(q, do, gc, final_state_grad, want_dh0, scale, index, precise=False):
    """dh [NT, H, K, V] (``state_dtype``): gradient w.r.t. the state leaving each chunk; dh0 [N, H, K, V] fp32 or None."""
    _, _, H, K = q.shape
    V = do.shape[-1]
    BK, BV = block_size(K, triton_fwd.STATE_TILE), block_size(V, triton_fwd.STATE_TILE)
    dh = torch.empty(index.num_chunks, H, K, V, dtype=triton_fwd.state_dtype(q.dtype), device=q.device)
    dh0 = torch.empty(index.num_seqs, H, K, V, dtype=torch.float32, device=q.device) if want_dh0 else None
    grid = (index.num_seqs * H, triton.cdiv(K, BK), triton.cdiv(V, BV))
    chunk_bwd_dh_kernel[grid](q, do, gc, dh, final_state_grad, dh0, index.cu_seqlens, index.chunk_offsets, scale,
                              H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=gc is not None,
                              USE_DHT=final_state_grad is not None, STORE_DH0=want_dh0,
                              **dot_args(q.dtype, K, precise))
    return dh, dh0


def chunk_bwd_dv(q, k, do, gc, dh, scale, index, precise=False):
    _, _, H, K = q.shape
    V = do.shape[-1]
    dots = dot_args(q.dtype, K, precise)
    BK, BV = block_size(K), value_tile(V, dots["LOW"])
    dv = torch.empty_like(do)
    grid = (index.num_chunks, triton.cdiv(V, BV), H)
    chunk_bwd_dv_kernel[grid](q, k, do, gc, dh, dv, index.cu_seqlens, index.chunk_indices, scale,
                              H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=gc is not None, **dots)
    return dv


def chunk_bwd_dqk(q, k, v, do, gc, h, dh, scale, index, precise=False):
    """dq, dk [1, T, H, K] and dg [1, T, H] fp32 (None without decay)."""
    _, TOTAL, H, K = q.shape
    V = v.shape[-1]
    BK, BV = block_size(K, triton_fwd.KEY_TILE), block_size(V)
    NK = triton.cdiv(K, BK)
    dq, dk = torch.empty_like(q), torch.empty_like(k)
    db_partial = torch.empty(NK, TOTAL, H, dtype=torch.float32, device=q.device) if gc is not None else None
    grid = (index.num_chunks, NK, H)
    chunk_bwd_dqk_kernel[grid](q, k, v, do, gc, h, dh, dq, dk, db_partial, index.cu_seqlens, index.chunk_indices,
                               scale, TOTAL, H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=gc is not None,
                               **dot_args(q.dtype, K, precise))
    if gc is None:
        return dq, dk, None
    dg = torch.empty(1, TOTAL, H, dtype=torch.float32, device=q.device)
    chunk_local_reverse_cumsum_kernel[(index.num_chunks, H)](db_partial, dg, index.cu_seqlens, index.chunk_indices,
                                                             TOTAL, H=H, BT=CHUNK_SIZE, NK=NK)
    return dq, dk, dg
