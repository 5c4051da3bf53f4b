"""Triton backward of the chunked gated delta rule (notes/chunked-algorithms.md §2), in four kernels.

Per chunk, with S_0 = h (state entering the chunk), dS = dh (gradient of the state leaving it),
M^{-1} = (I + A)^{-1}, gamma = exp(b) and R_ij = exp(b_i - b_j):
1. ``intra_dv`` (parallel over chunks): d_delta_intra = scale tril(R * Q K^T)^T dO; it depends on no state, so
   it stays out of the serial pass.
2. ``state`` (sequential, chunks in reverse): d_delta = d_delta_intra + diag(exp(b_C - b)) K dS and
   dS_0 = exp(b_C) dS + scale (diag(gamma) Q)^T dO - W^T d_delta, the [K, BV] dS in fp32 registers.
3. ``grad_output`` (parallel): the output and state-update terms,
       dQ = scale diag(gamma) dO S_0^T + dP K,    dP = scale (dO delta^T) * R, lower,
   and the first part of dK = dP^T Q + diag(gamma_C / gamma) delta dS^T and of db.
4. ``grad_wy`` (parallel): the WY terms, dW = -d_delta S_0^T, dU = d_delta, dV = diag(beta) M^{-T} dU,
       dM^{-1} = dU (diag(beta) V)^T + dW (diag(beta gamma) K)^T,  dA = -M^{-T} dM^{-1} M^{-T} (strict lower),
   the rest of dK (+ diag(beta gamma) M^{-T} dW + the dA*R terms), dbeta, and dg, the reverse cumulative sum
   inside the chunk of db (the gradient of the in-chunk cumulative log decay, from every exp(b) factor).
The gradient terms are split over two kernels because one program holding all five accumulators spilled
kilobytes per thread at sm_90.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.chunk_tables import CHUNK_SIZE, chunk_rows, sequence_rows
from ..common.dot import dot, dot_mode
from ..common.triton_utils import autotune, load_state, state_tile, tile
from .state_configs import BWD_STATE_CONFIGS, parallel_width
from .triton_segments import bwd_segment_states

# One stage: more does not fit shared memory with K = V = 128 (sm_90). 8 warps split a product's N over two
# warpgroups: at N = 32 (16 each) Triton 3.6 read shared memory out of bounds on the H200, so V blocks are 64 wide.
_GRAD_CONFIGS = [triton.Config({"BV": 64}, num_warps=8, num_stages=1)]


@autotune(configs=[triton.Config({}, num_warps=w) for w in (4, 8)], key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_bwd_kernel_intra_dv(
    q, k, b_cum, do, dd_intra, cu_seqlens, chunk_indices, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    # dO comes in o's dtype, which is v's: the compute dtype whenever v is 16-bit.
    DT = do.dtype.element_ty
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg, i_c, bos, eos, o_t, r_t, m_t = chunk_rows(chunk_indices, cu_seqlens, i_tg, BT)
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)
    b_qt = tl.load(q + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
    b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)

    # [BT, BT] transposed intra-chunk scores: entry (j, i) = R_ij q_i.k_j for j <= i.
    m_upper = (o_t[:, None] <= o_t[None, :]) & m_t[:, None] & m_t[None, :]
    b_Pt = dot(b_k, b_qt, DT, PRECISION, WIDEN)
    b_Pt = tl.where(m_upper, scale * b_Pt * tl.exp(tl.where(m_upper, b_b[None, :] - b_b[:, None], 0.)), 0.)
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        b_do = tl.load(do + p_v, mask=m_tv, other=0.)
        tl.store(dd_intra + p_v, dot(b_Pt, b_do, DT, PRECISION, WIDEN), mask=m_tv)


@autotune(configs=BWD_STATE_CONFIGS, key=["WIDTH", "H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T", "WIDTH"])
def gdn_bwd_kernel_state(
    q, k, w, b_cum, do, dd_intra, dh, dv_new, dht, dh0, cu_seqlens, chunk_offsets, scale, T, WIDTH,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_FINAL_STATE_GRADIENT: tl.constexpr, STORE_INITIAL_STATE_GRADIENT: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = w.dtype.element_ty
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_nh, i_h, bos, eos, boh, NT = sequence_rows(cu_seqlens, chunk_offsets, i_nh, H, BT)
    o_t = tl.arange(0, BT)
    o_k, o_v, m_k, m_v, m_kv, o_kv = state_tile(0, i_v, K, V, BK, BV)
    b_dS = load_state(dht, i_nh, o_kv, m_kv, K, V, BK, BV, USE_FINAL_STATE_GRADIENT)
    for i_s in range(0, NT):
        i_c = NT - 1 - tl.cast(i_s, tl.int64)
        tl.store(dh + ((boh + i_c) * H + i_h) * K * V + o_kv, b_dS.to(dh.dtype.element_ty), mask=m_kv)
        r_t = bos + i_c * BT + o_t
        m_t = r_t < eos
        m_tk = m_t[:, None] & m_k[None, :]
        m_kt = m_k[:, None] & m_t[None, :]
        m_tv = m_t[:, None] & m_v[None, :]
        b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
        b_last = tl.load(b_cum + (tl.minimum(bos + i_c * BT + BT, eos) - 1) * H + i_h)
        b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_tk, other=0.)
        b_qt = tl.load(q + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_kt, other=0.)
        b_wt = tl.load(w + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_kt, other=0.)
        p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        b_do = tl.load(do + p_v, mask=m_tv, other=0.)

        # Decays scale the [BT, BV] tiles (product rows, dO rows), not the [BT, K] keys and queries.
        b_dd = (tl.load(dd_intra + p_v, mask=m_tv, other=0.)
                + dot(b_k, b_dS, DT, PRECISION, WIDEN) * tl.exp(b_last - b_b)[:, None])
        tl.store(dv_new + p_v, b_dd.to(dv_new.dtype.element_ty), mask=m_tv)

        b_dog = b_do.to(tl.float32) * (scale * tl.exp(b_b))[:, None]
        b_dS = b_dS * tl.exp(b_last) + dot(b_qt, b_dog, DT, PRECISION, WIDEN)
        b_dS -= dot(b_wt, b_dd, DT, PRECISION, WIDEN)
    if STORE_INITIAL_STATE_GRADIENT:
        tl.store(dh0 + i_nh * K * V + o_kv, b_dS, mask=m_kv)


@triton.jit
def _grad_chunk(b_cum, cu_seqlens, chunk_indices, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                BT: tl.constexpr, BK: tl.constexpr):
    """The program (chunk, head) of a gradient kernel, all of K in one tile: (i_tg as int64, head, chunk index
    within its sequence, sequence start and end, offsets in the chunk, token rows, their mask, K offsets, their
    mask, the [BT, BK] mask, offsets of the chunk's [K, V] state with a V offset to add along rows (``+ o_v[:,
    None]`` reads it transposed), the chunk's cumulative log decays b)."""
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg, i_c, bos, eos, o_t, r_t, m_t = chunk_rows(chunk_indices, cu_seqlens, i_tg, BT)
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
    return (i_tg, i_h, i_c, bos, eos, o_t, r_t, m_t, o_k, m_k, m_t[:, None] & m_k[None, :],
            (i_tg * H + i_h) * K * V + o_k[None, :] * V, b_b)


@triton.jit
def _value_block(h, p_hk, i_v, i_h, r_t, m_t, m_k, H: tl.constexpr, V: tl.constexpr, BV: tl.constexpr):
    """V block i_v of a gradient kernel's chunk: (V offsets, the [BV, BK] state mask, the [BT, BV] and [BV, BT]
    masks and offsets into [T, H, V] tensors, the transposed state block S_0^T [BV, BK] in fp32)."""
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    m_vk = m_v[:, None] & m_k[None, :]
    b_St = tl.load(h + p_hk + o_v[:, None], mask=m_vk, other=0.).to(tl.float32)
    return (o_v, m_vk, m_t[:, None] & m_v[None, :], m_v[:, None] & m_t[None, :],
            (r_t[:, None] * H + i_h) * V + o_v[None, :], (r_t[None, :] * H + i_h) * V + o_v[:, None], b_St)


@autotune(configs=_GRAD_CONFIGS, key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_bwd_kernel_grad_output(
    q, k, b_cum, h, dh, v_new, do, dq, dk_part, db_part, cu_seqlens, chunk_indices, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    """dQ; dK and db from the output (S_0 and P) and state-update terms, to ``dk_part``, ``db_part`` in fp32."""
    DT = h.dtype.element_ty
    i_tg, i_h, i_c, bos, eos, o_t, r_t, m_t, o_k, m_k, m_tk, p_hk, b_b = _grad_chunk(
        b_cum, cu_seqlens, chunk_indices, H, K, V, BT, BK)

    b_dq = tl.zeros([BT, BK], dtype=tl.float32)
    b_dks = tl.zeros([BT, BK], dtype=tl.float32)
    b_dP = tl.zeros([BT, BT], dtype=tl.float32)
    b_dlast = tl.zeros([BV], dtype=tl.float32)
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v, m_vk, m_tv, m_vt, p_tv, p_vt, b_St = _value_block(h, p_hk, i_v, i_h, r_t, m_t, m_k, H, V, BV)
        b_dSt = tl.load(dh + p_hk + o_v[:, None], mask=m_vk, other=0.).to(tl.float32)
        b_do = tl.load(do + p_tv, mask=m_tv, other=0.).to(tl.float32)
        b_d = tl.load(v_new + p_tv, mask=m_tv, other=0.).to(tl.float32)
        b_dt = tl.load(v_new + p_vt, mask=m_vt, other=0.).to(tl.float32)

        b_dq += dot(b_do, b_St, DT, PRECISION, WIDEN)
        b_dks += dot(b_d, b_dSt, DT, PRECISION, WIDEN)
        b_dP += dot(b_do, b_dt, DT, PRECISION, WIDEN)
        b_dlast += tl.sum(b_St * b_dSt, 1)

    b_q = tl.load(q + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_tk, other=0.).to(tl.float32)
    b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_tk, other=0.).to(tl.float32)
    b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :],
                   other=0.).to(tl.float32)
    i_last = tl.minimum(eos - bos - i_c * BT, BT) - 1
    b_blast = tl.sum(tl.where(o_t == i_last, b_b, 0.), 0)
    b_gamma = tl.exp(b_b)

    # Output terms: inter-chunk (S_0) and intra-chunk (P).
    m_lower = (o_t[:, None] >= o_t[None, :]) & m_t[:, None] & m_t[None, :]
    b_R = tl.where(m_lower, tl.exp(tl.where(m_lower, b_b[:, None] - b_b[None, :], 0.)), 0.)
    b_dq = b_dq * (scale * b_gamma)[:, None]
    b_db = tl.sum(b_dq * b_q, 1)
    b_dP = scale * b_dP * b_R
    b_dq += dot(b_dP, b_k, DT, PRECISION, WIDEN)
    b_dk = dot(tl.trans(b_dP), b_q, DT, PRECISION, WIDEN)
    b_E = b_dP * dot(b_q, b_kt, DT, PRECISION, WIDEN)
    b_db += tl.sum(b_E, 1) - tl.sum(b_E, 0)

    # State update term: (diag(gamma_C / gamma) K)^T delta.
    b_dks = b_dks * tl.where(m_t, tl.exp(b_blast - b_b), 0.)[:, None]
    b_dk += b_dks
    b_e = tl.sum(b_dks * b_k, 1)
    b_db += tl.where(o_t == i_last, tl.sum(b_e, 0) + tl.exp(b_blast) * tl.sum(b_dlast, 0), 0.) - b_e

    p_tk = (r_t[:, None] * H + i_h) * K + o_k[None, :]
    tl.store(dq + p_tk, b_dq.to(dq.dtype.element_ty), mask=m_tk)
    tl.store(dk_part + p_tk, b_dk, mask=m_tk)
    tl.store(db_part + r_t * H + i_h, b_db, mask=m_t)


@autotune(configs=_GRAD_CONFIGS, key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_bwd_kernel_grad_wy(
    k, v, b_cum, beta, m_inv, h, dv_new, dk_part, db_part, dk, dv, dg, dbeta, cu_seqlens, chunk_indices, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    """dV, dbeta; the WY terms of dK and db added to ``dk_part`` and ``db_part``; dg."""
    DT = h.dtype.element_ty
    i_tg, i_h, i_c, bos, eos, o_t, r_t, m_t, o_k, m_k, m_tk, p_hk, b_b = _grad_chunk(
        b_cum, cu_seqlens, chunk_indices, H, K, V, BT, BK)
    b_beta = tl.load(beta + r_t * H + i_h, mask=m_t, other=0.).to(tl.float32)
    # M^{-T}: element (r, c) = M^{-1}_{cr}.
    b_Mt = tl.load(m_inv + ((i_tg * H + i_h) * BT + o_t[None, :]) * BT + o_t[:, None])

    b_dw = tl.zeros([BT, BK], dtype=tl.float32)
    b_dM = tl.zeros([BT, BT], dtype=tl.float32)
    b_dbeta = tl.zeros([BT], dtype=tl.float32)
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v, m_vk, m_tv, m_vt, p_tv, p_vt, b_St = _value_block(h, p_hk, i_v, i_h, r_t, m_t, m_k, H, V, BV)
        b_dd = tl.load(dv_new + p_tv, mask=m_tv, other=0.).to(tl.float32)
        b_v = tl.load(v + p_tv, mask=m_tv, other=0.).to(tl.float32)
        b_vt = tl.load(v + p_vt, mask=m_vt, other=0.).to(tl.float32)

        b_dw += dot(b_dd, b_St, DT, PRECISION, WIDEN)
        b_dM += dot(b_dd, b_vt, DT, PRECISION, WIDEN)
        b_dvb = dot(b_Mt, b_dd, DT, PRECISION, WIDEN)
        b_dbeta += tl.sum(b_dvb * b_v, 1)
        tl.store(dv + p_tv, (b_dvb * b_beta[:, None]).to(dv.dtype.element_ty), mask=m_tv)

    p_tk = (r_t[:, None] * H + i_h) * K + o_k[None, :]
    b_k = tl.load(k + p_tk, mask=m_tk, other=0.).to(tl.float32)
    b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :],
                   other=0.).to(tl.float32)
    b_db = tl.load(db_part + r_t * H + i_h, mask=m_t, other=0.)
    b_gamma = tl.exp(b_b)
    m_strict = (o_t[:, None] > o_t[None, :]) & m_t[:, None] & m_t[None, :]
    b_R = tl.where(m_strict, tl.exp(tl.where(m_strict, b_b[:, None] - b_b[None, :], 0.)), 0.)

    # WY terms: W = M^{-1} diag(beta gamma) K, U = M^{-1} diag(beta) V. Ordered so that few [BT, BK]
    # tiles are live at once (the K^T and dW tiles die before dK is formed).
    b_bg = b_beta * b_gamma
    b_dW = -b_dw
    b_dM = b_dM * b_beta[None, :] + dot(b_dW, (b_kt * b_bg[None, :]), DT, PRECISION, WIDEN)
    b_kk = dot(b_k, b_kt, DT, PRECISION, WIDEN)
    b_dA = dot(dot(b_Mt, b_dM, DT, PRECISION, WIDEN), b_Mt, DT, PRECISION, WIDEN)
    b_dAR = tl.where(m_strict, -b_dA * b_R, 0.)
    b_dbeta += tl.sum(b_dAR * b_kk, 1)
    b_dAR = b_dAR * b_beta[:, None]
    b_E = b_dAR * b_kk
    b_db += tl.sum(b_E, 1) - tl.sum(b_E, 0)
    b_dKbg = dot(b_Mt, b_dW, DT, PRECISION, WIDEN)
    b_t = tl.sum(b_dKbg * b_k, 1)
    b_dbeta += b_t * b_gamma
    b_db += b_t * b_bg
    b_dk = tl.load(dk_part + p_tk, mask=m_tk, other=0.) + b_dKbg * b_bg[:, None]
    b_dk += dot(b_dAR, b_k, DT, PRECISION, WIDEN)
    b_dk += dot(tl.trans(b_dAR), b_k, DT, PRECISION, WIDEN)

    b_dg = tl.sum(tl.where((o_t[None, :] >= o_t[:, None]) & m_t[None, :], b_db[None, :], 0.), 1)
    tl.store(dk + p_tk, b_dk.to(dk.dtype.element_ty), mask=m_tk)
    tl.store(dg + r_t * H + i_h, b_dg.to(dg.dtype.element_ty), mask=m_t)
    tl.store(dbeta + r_t * H + i_h, b_dbeta.to(dbeta.dtype.element_ty), mask=m_t)


def chunk_gdn_bwd(q, k, v, beta, scale, h0, tables, saved, do, dht, plan=None):
    """Gradients (dq, dk, dv, dg fp32, dbeta fp32, dh0 fp32 or None) from the forward's intermediates ``saved``, the
    serial pass split into the segments of ``plan`` (``segments.SegmentPlan``) when one is given."""
    b_cum, m_inv, w, h, v_new, chunk_bound = saved
    _, T, H, K = k.shape
    V = v.shape[-1]
    BT, BK = CHUNK_SIZE, tile(K, 256)
    cu_seqlens, chunk_indices, chunk_offsets, NT, N = tables
    precision, widen = dot_mode(h.dtype)
    dh = torch.empty(NT, H, K, V, dtype=h.dtype, device=k.device)
    dv_new = torch.empty(v.shape, dtype=h.dtype, device=k.device)
    dd_intra = torch.empty(v.shape, dtype=torch.float32, device=k.device)
    gdn_bwd_kernel_intra_dv[(NT, H)](
        q, k, b_cum, do, dd_intra, cu_seqlens, chunk_indices, scale, T,
        H=H, K=K, V=V, BT=BT, BK=BK, BV=tile(V, 64), PRECISION=precision, WIDEN=widen)
    # The serial pass walks whole sequences, or the segments of ``plan`` from the state gradients leaving them
    # (segments.py).
    serial_cu, serial_offsets, serial_count = cu_seqlens, chunk_offsets, N
    if plan is not None:
        dht = bwd_segment_states(plan, q, k, w, b_cum, do, dd_intra, chunk_bound, dht, scale)
        serial_cu, serial_offsets, serial_count = plan.cu_seqlens, plan.chunk_offsets, plan.num_segments
    dh0 = torch.empty(serial_count, H, K, V, dtype=torch.float32, device=k.device) if h0 is not None else None
    gdn_bwd_kernel_state[lambda meta: (triton.cdiv(V, meta["BV"]), serial_count * H)](
        q, k, w, b_cum, do, dd_intra, dh, dv_new, dht, dh0, serial_cu, serial_offsets, scale, T,
        WIDTH=parallel_width(serial_count, H), H=H, K=K, V=V, BT=BT, BK=BK,
        USE_FINAL_STATE_GRADIENT=dht is not None, STORE_INITIAL_STATE_GRADIENT=h0 is not None,
        PRECISION=precision, WIDEN=widen)
    if plan is not None and dh0 is not None:
        dh0 = dh0[plan.first]
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    dg = torch.empty(beta.shape, dtype=torch.float32, device=beta.device)
    dbeta = torch.empty(beta.shape, dtype=torch.float32, device=beta.device)
    dk_part = torch.empty(k.shape, dtype=torch.float32, device=k.device)
    db_part = torch.empty(beta.shape, dtype=torch.float32, device=beta.device)
    gdn_bwd_kernel_grad_output[(NT, H)](
        q, k, b_cum, h, dh, v_new, do, dq, dk_part, db_part, cu_seqlens, chunk_indices, scale, T,
        H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
    gdn_bwd_kernel_grad_wy[(NT, H)](
        k, v, b_cum, beta, m_inv, h, dv_new, dk_part, db_part, dk, dv, dg, dbeta, cu_seqlens, chunk_indices, T,
        H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
    return dq, dk, dv, dg, dbeta, dh0
