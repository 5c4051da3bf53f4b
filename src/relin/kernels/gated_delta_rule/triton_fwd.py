"""Triton forward of the chunked gated delta rule (notes/chunked-algorithms.md §2), chunk size BT = 64.

Per chunk and head, with b the in-chunk cumulative log decay, gamma = exp(b), R_ij = exp(b_i - b_j):
1. ``kkt_inverse`` (parallel over chunks): b, and the unit lower-triangular
   M^{-1} = (I + tril_{-1}(diag(beta)(R * K K^T)))^{-1}, on sixteen 16 x 16 blocks held in registers: forward
   substitution on the four diagonal blocks, then X_ij = -X_ii sum_{j <= m < i} A_im X_mj (fla's fused
   kkt + solve_tril layout). M^{-1} is stored in the compute dtype: every product that reads it rounds its
   operands to that dtype anyway.
2. ``wu`` (parallel): W = M^{-1} diag(beta gamma) K, U = M^{-1} diag(beta) V.
3. ``state`` (sequential over the chunks of each sequence): delta = U - W S_0 and
   S_C = gamma_C S_0 + (diag(gamma_C / gamma) K)^T delta, the [K, BV] state in fp32 registers.
4. ``output`` (parallel, K in slices): O = scale (diag(gamma) Q S_0 + tril(R * Q K^T) delta).

Precision, as in fla: with 16-bit inputs the intermediates (W, U, per-chunk states, deltas) are stored in that
dtype and products take 16-bit operands with fp32 accumulation; the running state, decays and the final state
stay fp32. With fp32 inputs everything is fp32 with exact (ieee) products.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.chunk_tables import CHUNK_SIZE, chunk_rows, locate_chunk, sequence_rows
from ..common.dot import dot, dot_mode
from ..common.triton_utils import autotune, load_state, state_tile, tensor_descriptors, tile
from .state_configs import FWD_STATE_CONFIGS, parallel_width
from .triton_segments import fwd_segment_states


@triton.jit
def _gram_block(b_kk, b_bi, b_bj, b_beta_i, m_i, m_j, DIAGONAL: tl.constexpr):
    """beta_i exp(b_i - b_j) k_i . k_j for one 16 x 16 block (b_kk) of the strictly lower A, zero elsewhere.
    The exponent is masked before exp: above the diagonal b_i - b_j > 0 can overflow."""
    o = tl.arange(0, 16)
    keep = m_i[:, None] & m_j[None, :]
    if DIAGONAL:
        keep = keep & (o[:, None] > o[None, :])
    b_R = tl.exp(tl.where(keep, b_bi[:, None] - b_bj[None, :], 0.))
    return tl.where(keep, b_R * b_beta_i[:, None] * b_kk, 0.)


@triton.jit
def _substitute_row(b_A, b_X, i: tl.constexpr):
    """Row i of the strictly lower part of (I + A)^{-1}, rows < i done: -A_i - sum_{m<i} A_im X_m."""
    o = tl.arange(0, 16)
    b_a = -tl.sum(tl.where((o == i)[:, None], b_A, 0.), 0)
    b_row = b_a + tl.sum(b_a[:, None] * b_X, 0)
    return tl.where((o == i)[:, None], b_row[None, :], b_X)


# Configs kept from the H200 sweeps of docs/measurements/gdn-h200.md at de9179e.
_KKT_CONFIGS = [triton.Config({"BK": 64}, num_warps=w) for w in (2, 1, 4)]
_WU_CONFIGS = [triton.Config({"BV": 64}, num_warps=w, num_stages=s) for w, s in ((4, 3), (8, 2))]
# fla's layout: 64-wide K slices accumulated in a loop, so the pipeliner overlaps the next slice's loads with this
# slice's products (one-shot loads of all of K, or TMA descriptor loads, were slower on the H200). BV = 128 computes
# Q K^T once per chunk instead of once per V block. Tuned per number of programs (WIDTH).
_OUTPUT_CONFIGS = [triton.Config({"BK": bk, "BV": bv}, num_warps=w, num_stages=s)
                   for bk, bv, w, s in ((64, 128, 8, 3), (64, 128, 4, 3), (64, 128, 8, 4), (128, 64, 4, 2),
                                        (32, 64, 4, 3))]


@autotune(configs=_KKT_CONFIGS, key=["H", "K", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_fwd_kernel_kkt_inverse(
    k, g, beta, b_cum, m_inv, chunk_bound, cu_seqlens, chunk_indices, T,
    H: tl.constexpr, K: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = m_inv.dtype.element_ty
    tl.static_assert(BT == 64, "the blockwise inverse is written for 64-token chunks")
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg = tl.cast(i_tg, tl.int64)
    i_c, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_tg)

    o = tl.arange(0, 16)
    r0 = bos + i_c * BT + o
    r1, r2, r3 = r0 + 16, r0 + 32, r0 + 48
    m0, m1, m2, m3 = r0 < eos, r1 < eos, r2 < eos, r3 < eos
    g0 = tl.load(g + r0 * H + i_h, mask=m0, other=0.).to(tl.float32)
    g1 = tl.load(g + r1 * H + i_h, mask=m1, other=0.).to(tl.float32)
    g2 = tl.load(g + r2 * H + i_h, mask=m2, other=0.).to(tl.float32)
    g3 = tl.load(g + r3 * H + i_h, mask=m3, other=0.).to(tl.float32)
    b0 = tl.cumsum(g0, 0)
    b1 = tl.cumsum(g1, 0) + tl.sum(g0, 0)
    b2 = tl.cumsum(g2, 0) + tl.sum(g1, 0) + tl.sum(g0, 0)
    b3 = tl.cumsum(g3, 0) + tl.sum(g2, 0) + tl.sum(g1, 0) + tl.sum(g0, 0)
    tl.store(b_cum + r0 * H + i_h, b0, mask=m0)
    tl.store(b_cum + r1 * H + i_h, b1, mask=m1)
    tl.store(b_cum + r2 * H + i_h, b2, mask=m2)
    tl.store(b_cum + r3 * H + i_h, b3, mask=m3)
    be0 = tl.load(beta + r0 * H + i_h, mask=m0, other=0.).to(tl.float32)
    be1 = tl.load(beta + r1 * H + i_h, mask=m1, other=0.).to(tl.float32)
    be2 = tl.load(beta + r2 * H + i_h, mask=m2, other=0.).to(tl.float32)
    be3 = tl.load(beta + r3 * H + i_h, mask=m3, other=0.).to(tl.float32)

    # The ten lower blocks of K K^T, accumulated over K in BK-wide slices.
    a00 = tl.zeros([16, 16], dtype=tl.float32)
    a11 = tl.zeros([16, 16], dtype=tl.float32)
    a22 = tl.zeros([16, 16], dtype=tl.float32)
    a33 = tl.zeros([16, 16], dtype=tl.float32)
    a10 = tl.zeros([16, 16], dtype=tl.float32)
    a20 = tl.zeros([16, 16], dtype=tl.float32)
    a21 = tl.zeros([16, 16], dtype=tl.float32)
    a30 = tl.zeros([16, 16], dtype=tl.float32)
    a31 = tl.zeros([16, 16], dtype=tl.float32)
    a32 = tl.zeros([16, 16], dtype=tl.float32)
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        k0 = tl.load(k + (r0[:, None] * H + i_h) * K + o_k[None, :], mask=m0[:, None] & m_k[None, :], other=0.)
        k1 = tl.load(k + (r1[:, None] * H + i_h) * K + o_k[None, :], mask=m1[:, None] & m_k[None, :], other=0.)
        k2 = tl.load(k + (r2[:, None] * H + i_h) * K + o_k[None, :], mask=m2[:, None] & m_k[None, :], other=0.)
        k3 = tl.load(k + (r3[:, None] * H + i_h) * K + o_k[None, :], mask=m3[:, None] & m_k[None, :], other=0.)
        k0t, k1t, k2t = tl.trans(k0), tl.trans(k1), tl.trans(k2)
        a00 += dot(k0, k0t, DT, PRECISION, WIDEN)
        a11 += dot(k1, k1t, DT, PRECISION, WIDEN)
        a22 += dot(k2, k2t, DT, PRECISION, WIDEN)
        a33 += dot(k3, tl.trans(k3), DT, PRECISION, WIDEN)
        a10 += dot(k1, k0t, DT, PRECISION, WIDEN)
        a20 += dot(k2, k0t, DT, PRECISION, WIDEN)
        a21 += dot(k2, k1t, DT, PRECISION, WIDEN)
        a30 += dot(k3, k0t, DT, PRECISION, WIDEN)
        a31 += dot(k3, k1t, DT, PRECISION, WIDEN)
        a32 += dot(k3, k2t, DT, PRECISION, WIDEN)
    # The chunk's bound exponent (segments.py): sum_t g_t + log max(1, |1 - beta_t |k_t|^2|), |k_t|^2 from the
    # diagonals of K K^T (rows past the end have g = beta = 0 and add nothing).
    on_diagonal = o[:, None] == o[None, :]
    grow = (tl.log(tl.maximum(tl.abs(1. - be0 * tl.sum(tl.where(on_diagonal, a00, 0.), 1)), 1.))
            + tl.log(tl.maximum(tl.abs(1. - be1 * tl.sum(tl.where(on_diagonal, a11, 0.), 1)), 1.))
            + tl.log(tl.maximum(tl.abs(1. - be2 * tl.sum(tl.where(on_diagonal, a22, 0.), 1)), 1.))
            + tl.log(tl.maximum(tl.abs(1. - be3 * tl.sum(tl.where(on_diagonal, a33, 0.), 1)), 1.)))
    tl.store(chunk_bound + i_tg * H + i_h, tl.sum(g0 + g1 + g2 + g3 + grow, 0))
    a00 = _gram_block(a00, b0, b0, be0, m0, m0, True)
    a11 = _gram_block(a11, b1, b1, be1, m1, m1, True)
    a22 = _gram_block(a22, b2, b2, be2, m2, m2, True)
    a33 = _gram_block(a33, b3, b3, be3, m3, m3, True)
    a10 = _gram_block(a10, b1, b0, be1, m1, m0, False)
    a20 = _gram_block(a20, b2, b0, be2, m2, m0, False)
    a21 = _gram_block(a21, b2, b1, be2, m2, m1, False)
    a30 = _gram_block(a30, b3, b0, be3, m3, m0, False)
    a31 = _gram_block(a31, b3, b1, be3, m3, m1, False)
    a32 = _gram_block(a32, b3, b2, be3, m3, m2, False)

    # Diagonal blocks by forward substitution, the four chains interleaved (independent, so their
    # reductions overlap). Row 0 of each strictly lower part is 0 and row 1 is -A_1.
    x00, x11, x22, x33 = -a00, -a11, -a22, -a33
    for i in tl.static_range(2, 16):
        x00 = _substitute_row(a00, x00, i)
        x11 = _substitute_row(a11, x11, i)
        x22 = _substitute_row(a22, x22, i)
        x33 = _substitute_row(a33, x33, i)
    eye = tl.where(o[:, None] == o[None, :], 1., 0.)
    x00, x11, x22, x33 = x00 + eye, x11 + eye, x22 + eye, x33 + eye
    # Off-diagonal blocks from fp32 operands: tf32 products for 16-bit inputs, whose M^{-1} is then stored in
    # 16 bits (8 mantissa bits against tf32's 10), as in fla's solve_tril; exact products for fp32 inputs.
    F: tl.constexpr = tl.float32
    P: tl.constexpr = PRECISION
    x10 = -dot(x11, dot(a10, x00, F, P, WIDEN), F, P, WIDEN)
    x21 = -dot(x22, dot(a21, x11, F, P, WIDEN), F, P, WIDEN)
    x32 = -dot(x33, dot(a32, x22, F, P, WIDEN), F, P, WIDEN)
    x20 = -dot(x22, dot(a20, x00, F, P, WIDEN) + dot(a21, x10, F, P, WIDEN), F, P, WIDEN)
    x31 = -dot(x33, dot(a31, x11, F, P, WIDEN) + dot(a32, x21, F, P, WIDEN), F, P, WIDEN)
    x30 = -dot(x33, dot(a30, x00, F, P, WIDEN) + dot(a31, x10, F, P, WIDEN) + dot(a32, x20, F, P, WIDEN),
               F, P, WIDEN)

    p = m_inv + (i_tg * H + i_h) * BT * BT + o[:, None] * BT + o[None, :]
    zero = tl.zeros([16, 16], dtype=DT)
    tl.store(p, x00.to(DT))
    tl.store(p + 16, zero)
    tl.store(p + 32, zero)
    tl.store(p + 48, zero)
    tl.store(p + 16 * BT, x10.to(DT))
    tl.store(p + 16 * BT + 16, x11.to(DT))
    tl.store(p + 16 * BT + 32, zero)
    tl.store(p + 16 * BT + 48, zero)
    tl.store(p + 32 * BT, x20.to(DT))
    tl.store(p + 32 * BT + 16, x21.to(DT))
    tl.store(p + 32 * BT + 32, x22.to(DT))
    tl.store(p + 32 * BT + 48, zero)
    tl.store(p + 48 * BT, x30.to(DT))
    tl.store(p + 48 * BT + 16, x31.to(DT))
    tl.store(p + 48 * BT + 32, x32.to(DT))
    tl.store(p + 48 * BT + 48, x33.to(DT))


@autotune(configs=_WU_CONFIGS, key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_fwd_kernel_wu(
    k, v, beta, b_cum, m_inv, w, u, cu_seqlens, chunk_indices, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = w.dtype.element_ty
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg, i_c, bos, eos, o_t, r_t, m_t = chunk_rows(chunk_indices, cu_seqlens, i_tg, BT)
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    b_M = tl.load(m_inv + (i_tg * H + i_h) * BT * BT + o_t[:, None] * BT + o_t[None, :])
    b_beta = tl.load(beta + r_t * H + i_h, mask=m_t, other=0.).to(tl.float32)
    b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
    p_k = (r_t[:, None] * H + i_h) * K + o_k[None, :]
    m_tk = m_t[:, None] & m_k[None, :]
    b_k = tl.load(k + p_k, mask=m_tk, other=0.).to(tl.float32)
    b_w = dot(b_M, b_k * (b_beta * tl.exp(b_b))[:, None], DT, PRECISION, WIDEN)
    tl.store(w + p_k, b_w.to(DT), mask=m_tk)
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        b_v = tl.load(v + p_v, mask=m_tv, other=0.).to(tl.float32)
        b_u = dot(b_M, b_v * b_beta[:, None], DT, PRECISION, WIDEN)
        tl.store(u + p_v, b_u.to(DT), mask=m_tv)


@autotune(configs=FWD_STATE_CONFIGS, key=["WIDTH", "H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T", "WIDTH"])
def gdn_fwd_kernel_state(
    k, w, u, b_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, WIDTH,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, TMA: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    """One program per (V block, sequence x head); stores the state entering each chunk and the deltas.

    TMA: read W, K and U through tensor descriptors of the sequence (rows past its end read as zeros), which
    Triton's pipeliner prefetches; it leaves the masked pointer loads in the loop body, where each step waits.
    """
    DT = w.dtype.element_ty
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_nh, i_h, bos, eos, boh, NT = sequence_rows(cu_seqlens, chunk_offsets, i_nh, H, BT)
    o_t = tl.arange(0, BT)
    o_k, o_v, m_k, m_v, m_kv, o_kv = state_tile(0, i_v, K, V, BK, BV)
    b_S = load_state(h0, i_nh, o_kv, m_kv, K, V, BK, BV, USE_INITIAL_STATE)
    if TMA:
        rows = tl.cast(eos - bos, tl.int32)
        d_w = tl.make_tensor_descriptor(w + (bos * H + i_h) * K, [rows, K], [H * K, 1], [BT, BK])
        d_k = tl.make_tensor_descriptor(k + (bos * H + i_h) * K, [rows, K], [H * K, 1], [BT, BK])
        d_u = tl.make_tensor_descriptor(u + (bos * H + i_h) * V, [rows, V], [H * V, 1], [BT, BV])
    for i_s in range(0, NT):
        i_c = tl.cast(i_s, tl.int64)
        tl.store(h + ((boh + i_c) * H + i_h) * K * V + o_kv, b_S.to(h.dtype.element_ty), mask=m_kv)
        r_t = bos + i_c * BT + o_t
        m_t = r_t < eos
        m_tv = m_t[:, None] & m_v[None, :]
        p_u = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        if TMA:
            i_row = tl.cast(i_s * BT, tl.int32)
            b_w = d_w.load([i_row, 0])
            b_u = d_u.load([i_row, i_v * BV]).to(tl.float32)
        else:
            b_w = tl.load(w + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :],
                          other=0.)
            b_u = tl.load(u + p_u, mask=m_tv, other=0.).to(tl.float32)
        b_d = b_u - dot(b_w, b_S, DT, PRECISION, WIDEN)
        tl.store(v_new + p_u, b_d.to(v_new.dtype.element_ty), mask=m_tv)

        b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
        b_last = tl.load(b_cum + (tl.minimum(bos + i_c * BT + BT, eos) - 1) * H + i_h)
        if TMA:
            b_kt = tl.trans(d_k.load([i_row, 0]))
        else:
            b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :],
                           other=0.)
        # The decays scale the [BT, BV] delta rather than the [K, BT] keys: a quarter of the work per chunk.
        b_S = b_S * tl.exp(b_last) + dot(b_kt, b_d * tl.exp(b_last - b_b)[:, None], DT, PRECISION, WIDEN)
    if STORE_FINAL_STATE:
        tl.store(ht + i_nh * K * V + o_kv, b_S, mask=m_kv)


@autotune(configs=_OUTPUT_CONFIGS, key=["WIDTH", "H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T", "WIDTH"])
def gdn_fwd_kernel_output(
    q, k, v_new, h, b_cum, o, cu_seqlens, chunk_indices, scale, T, WIDTH,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = h.dtype.element_ty
    i_v, i_tg, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_tg, i_c, bos, eos, o_t, r_t, m_t = chunk_rows(chunk_indices, cu_seqlens, i_tg, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    b_P = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        b_q = tl.load(q + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)
        b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :],
                       other=0.)
        b_S = tl.load(h + (i_tg * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :],
                      mask=m_k[:, None] & m_v[None, :], other=0.)
        b_o += dot(b_q, b_S, DT, PRECISION, WIDEN)
        b_P += dot(b_q, b_kt, DT, PRECISION, WIDEN)
    p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
    m_tv = m_t[:, None] & m_v[None, :]
    b_d = tl.load(v_new + p_v, mask=m_tv, other=0.)
    b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)

    m_lower = (o_t[:, None] >= o_t[None, :]) & m_t[:, None] & m_t[None, :]
    b_P = tl.where(m_lower, b_P * tl.exp(tl.where(m_lower, b_b[:, None] - b_b[None, :], 0.)), 0.)
    b_o = b_o * tl.exp(b_b)[:, None] + dot(b_P, b_d, DT, PRECISION, WIDEN)
    tl.store(o + p_v, (scale * b_o).to(o.dtype.element_ty), mask=m_tv)


def compute_dtype(*xs: torch.Tensor) -> torch.dtype:
    """The first 16-bit input dtype (bf16/fp16 tensor-core products, 16-bit intermediates); fp32 if none."""
    return next((x.dtype for x in xs if x.dtype != torch.float32), torch.float32)


def chunk_gdn_fwd(q, k, v, g, beta, scale, h0, tables, store_final, plan=None):
    """Forward on packed inputs q, k [1, T, H, K], v [1, T, H, V], g, beta [1, T, H] with ``ChunkTables``, the
    serial pass split into the segments of ``plan`` (a ``segments.SegmentPlan``) when one is given.

    Returns o [1, T, H, V] in v's dtype, the final state [N, H, K, V] fp32 (or None) and the intermediates the
    backward reads: (b_cum, M^{-1}, W, per-chunk states h, deltas, per-chunk bound exponents).
    """
    _, T, H, K = k.shape
    V = v.shape[-1]
    BT, BK = CHUNK_SIZE, tile(K, 256)
    dtype = compute_dtype(v, k, q)
    precision, widen = dot_mode(dtype)
    cu_seqlens, chunk_indices, chunk_offsets, NT, N = tables
    b_cum = torch.empty(1, T, H, dtype=torch.float32, device=k.device)
    m_inv = torch.empty(NT, H, BT, BT, dtype=dtype, device=k.device)
    w = torch.empty(k.shape, dtype=dtype, device=k.device)
    u = torch.empty(v.shape, dtype=dtype, device=k.device)
    chunk_bound = torch.empty(NT, H, dtype=torch.float32, device=k.device)
    gdn_fwd_kernel_kkt_inverse[(NT, H)](
        k, g, beta, b_cum, m_inv, chunk_bound, cu_seqlens, chunk_indices, T, H=H, K=K, BT=BT, PRECISION=precision,
        WIDEN=widen)
    gdn_fwd_kernel_wu[(NT, H)](
        k, v, beta, b_cum, m_inv, w, u, cu_seqlens, chunk_indices, T,
        H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
    h = torch.empty(NT, H, K, V, dtype=dtype, device=k.device)
    v_new = torch.empty(v.shape, dtype=dtype, device=k.device)
    # The serial pass walks whole sequences, or the segments of ``plan`` from the states entering them
    # (segments.py).
    serial_cu, serial_offsets, serial_count = cu_seqlens, chunk_offsets, N
    if plan is not None:
        h0 = fwd_segment_states(plan, k, w, u, b_cum, chunk_bound, h0)
        serial_cu, serial_offsets, serial_count = plan.cu_seqlens, plan.chunk_offsets, plan.num_segments
    ht = torch.empty(serial_count, H, K, V, dtype=torch.float32, device=k.device) if store_final else None
    gdn_fwd_kernel_state[lambda meta: (triton.cdiv(V, meta["BV"]), serial_count * H)](
        k, w, u, b_cum, h, v_new, h0, ht, serial_cu, serial_offsets, T, WIDTH=parallel_width(serial_count, H),
        H=H, K=K, V=V, BT=BT, BK=BK, USE_INITIAL_STATE=h0 is not None, STORE_FINAL_STATE=store_final,
        TMA=tensor_descriptors(k.device), PRECISION=precision, WIDEN=widen)
    if plan is not None and store_final:
        ht = ht[plan.last]
    o = torch.empty_like(v)
    gdn_fwd_kernel_output[lambda meta: (triton.cdiv(V, meta["BV"]), NT, H)](
        q, k, v_new, h, b_cum, o, cu_seqlens, chunk_indices, scale, T, WIDTH=parallel_width(NT, H, 1 << 16),
        H=H, K=K, V=V, BT=BT, PRECISION=precision, WIDEN=widen)
    return o, ht, (b_cum, m_inv, w, h, v_new, chunk_bound)
