"""Per-chunk WY representation of the gated delta rule (notes/chunked-algorithms.md §2).

For each chunk and head, in parallel, two kernels:
``kkt_inverse``: b = in-chunk cumsum of g and the unit lower-triangular
    M^{-1} = (I + tril_{-1}(diag(beta)(R * K K^T)))^{-1}, R_ij = exp(b_i - b_j),
computed on sixteen 16 x 16 blocks held in registers: forward substitution on the four diagonal blocks,
then the off-diagonal blocks X_ij = -X_ii sum_{j <= m < i} A_im X_mj (fla's fused kkt + solve_tril layout);
``wu``: W = M^{-1} diag(beta exp(b)) K, U = M^{-1} diag(beta) V.
M^{-1} is stored in the compute dtype: every product that reads it (here and in ``grad.py``) rounds its
operands to that dtype anyway.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.chunk_tables import locate_chunk
from ..common.triton_utils import autotune
from .dot import dot


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    """fp32 product of 16 x 16 blocks: exact (ieee) for fp32 inputs; tf32 tensor-core products for 16-bit
    inputs, whose M^{-1} is then stored in 16 bits (8 mantissa bits against tf32's 10), as in fla's solve_tril."""
    return tl.dot(a, b, input_precision=PRECISION)


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


# H200, (1, 64K, 16, 128): BK=64 at 2 warps 0.57 ms (fla's fused kkt + solve_tril: 0.39); a doubling inverse
# (I + N)(I + N^2)(I + N^4)(I + N^8) instead of the substitution measured 0.60.
_KKT_CONFIGS = [triton.Config({"BK": 64}, num_warps=w) for w in (2, 1, 4)]  # BK=32 was never best


@autotune(configs=_KKT_CONFIGS, key=["H", "K", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_fwd_kernel_kkt_inverse(
    k, g, beta, b_cum, m_inv, cu_seqlens, chunk_indices, T,
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
    P: tl.constexpr = PRECISION
    x10 = -_dot(x11, _dot(a10, x00, P), P)
    x21 = -_dot(x22, _dot(a21, x11, P), P)
    x32 = -_dot(x33, _dot(a32, x22, P), P)
    x20 = -_dot(x22, _dot(a20, x00, P) + _dot(a21, x10, P), P)
    x31 = -_dot(x33, _dot(a31, x11, P) + _dot(a32, x21, P), P)
    x30 = -_dot(x33, _dot(a30, x00, P) + _dot(a31, x10, P) + _dot(a32, x20, P), P)

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


# H200 sweep at (1, 64K, 16, 128): BV=64 4 warps 3 stages 0.35 ms, 8 warps 2 stages 0.39, BV=32 0.40-0.46.
_WU_CONFIGS = [triton.Config({"BV": 64}, num_warps=w, num_stages=s) for w, s in ((4, 3), (8, 2))]


@autotune(configs=_WU_CONFIGS, key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_fwd_kernel_wu(
    k, v, beta, b_cum, m_inv, w, u, cu_seqlens, chunk_indices, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = w.dtype.element_ty
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg = tl.cast(i_tg, tl.int64)
    i_c, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_tg)

    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    m_t = r_t < eos
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
