"""Per-chunk WY representation of the gated delta rule (notes/chunked-algorithms.md §2).

For each chunk and head, in parallel: b = in-chunk cumsum of g, the unit lower-triangular
M^{-1} = (I + tril_{-1}(diag(beta)(R * K K^T)))^{-1} by blockwise forward substitution, and
W = M^{-1} diag(beta exp(b)) K, U = M^{-1} diag(beta) V.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.triton_utils import autotune
from .dot import dot


@triton.jit
def _dot(a, b):
    """fp32 product of 16 x 16 blocks, exact (ieee): the inverse feeds every later product."""
    return tl.dot(a, b, input_precision="ieee")


@triton.jit
def _unit_lower_inverse_16(p_A, STRIDE: tl.constexpr):
    """(I + A)^{-1} for a strictly lower-triangular [16, 16] A stored row-major at ``p_A``, row by row:
    row i is e_i - sum_{j<i} A_ij row_j (rows >= i are still zero when read). Rows of A are loaded
    rather than extracted from a register tile, which would cost a cross-thread reduction each."""
    o = tl.arange(0, 16)
    b_X = tl.zeros([16, 16], dtype=tl.float32)
    for i in tl.static_range(16):
        b_a = tl.load(p_A + i * STRIDE + o)
        b_row = tl.where(o == i, 1., 0.) - tl.sum(b_a[:, None] * b_X, 0)
        b_X = tl.where(o[:, None] == i, b_row[None, :], b_X)
    return b_X


# Offline sm_90 compile (bf16, K = V = 128): 8 warps 217 registers, no spill; 4 warps spill 176 B/thread,
# 2 warps about 1 KB, so 2 is not offered.
@autotune(configs=[triton.Config({}, num_warps=w) for w in (8, 4)], key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_fwd_kernel_wy(
    k, v, g, beta, b_cum, m_inv, w, u, cu_seqlens, chunk_indices, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = w.dtype.element_ty
    tl.static_assert(BT == 64, "the blockwise inverse is written for 64-token chunks")
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg = tl.cast(i_tg, tl.int64)
    i_n = tl.load(chunk_indices + i_tg * 2).to(tl.int64)
    i_c = tl.load(chunk_indices + i_tg * 2 + 1).to(tl.int64)
    bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)

    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    m_t = r_t < eos
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.).to(tl.float32)
    b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.).to(tl.float32)
    b_g = tl.load(g + r_t * H + i_h, mask=m_t, other=0.).to(tl.float32)
    b_beta = tl.load(beta + r_t * H + i_h, mask=m_t, other=0.).to(tl.float32)
    b_b = tl.cumsum(b_g, 0)
    tl.store(b_cum + r_t * H + i_h, b_b, mask=m_t)

    m_strict = (o_t[:, None] > o_t[None, :]) & m_t[:, None] & m_t[None, :]
    # Masked before exp: above the diagonal b_i - b_j > 0 can overflow.
    b_R = tl.exp(tl.where(m_strict, b_b[:, None] - b_b[None, :], 0.))
    b_A = tl.where(m_strict, b_beta[:, None] * b_R * dot(b_k, b_kt, DT, PRECISION, WIDEN), 0.)

    # (I + A)^{-1} blockwise: 16 x 16 diagonal blocks by forward substitution, then the
    # off-diagonal blocks X_ij = -X_ii sum_{j <= m < i} A_im X_mj, with A staged in m_inv.
    p_m = m_inv + (i_tg * H + i_h) * BT * BT
    tl.store(p_m + o_t[:, None] * BT + o_t[None, :], b_A)
    tl.debug_barrier()
    o_s = tl.arange(0, 16)
    p_s = p_m + o_s[:, None] * BT + o_s[None, :]
    b_A10 = tl.load(p_s + 16 * BT)
    b_A20 = tl.load(p_s + 32 * BT)
    b_A21 = tl.load(p_s + 32 * BT + 16)
    b_A30 = tl.load(p_s + 48 * BT)
    b_A31 = tl.load(p_s + 48 * BT + 16)
    b_A32 = tl.load(p_s + 48 * BT + 32)
    b_X00 = _unit_lower_inverse_16(p_m, BT)
    b_X11 = _unit_lower_inverse_16(p_m + 16 * BT + 16, BT)
    b_X22 = _unit_lower_inverse_16(p_m + 32 * BT + 32, BT)
    b_X33 = _unit_lower_inverse_16(p_m + 48 * BT + 48, BT)
    b_X10 = -_dot(b_X11, _dot(b_A10, b_X00))
    b_X21 = -_dot(b_X22, _dot(b_A21, b_X11))
    b_X32 = -_dot(b_X33, _dot(b_A32, b_X22))
    b_X20 = -_dot(b_X22, _dot(b_A20, b_X00) + _dot(b_A21, b_X10))
    b_X31 = -_dot(b_X33, _dot(b_A31, b_X11) + _dot(b_A32, b_X21))
    b_X30 = -_dot(b_X33, _dot(b_A30, b_X00) + _dot(b_A31, b_X10) + _dot(b_A32, b_X20))
    tl.debug_barrier()
    tl.store(p_s, b_X00)
    tl.store(p_s + 16 * BT, b_X10)
    tl.store(p_s + 16 * BT + 16, b_X11)
    tl.store(p_s + 32 * BT, b_X20)
    tl.store(p_s + 32 * BT + 16, b_X21)
    tl.store(p_s + 32 * BT + 32, b_X22)
    tl.store(p_s + 48 * BT, b_X30)
    tl.store(p_s + 48 * BT + 16, b_X31)
    tl.store(p_s + 48 * BT + 32, b_X32)
    tl.store(p_s + 48 * BT + 48, b_X33)
    tl.debug_barrier()
    b_M = tl.load(p_m + o_t[:, None] * BT + o_t[None, :])

    b_kbg = (b_k * (b_beta * tl.exp(b_b))[:, None])
    b_w = dot(b_M, b_kbg, DT, PRECISION, WIDEN)
    tl.store(w + (r_t[:, None] * H + i_h) * K + o_k[None, :], b_w.to(w.dtype.element_ty),
             mask=m_t[:, None] & m_k[None, :])
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        b_v = tl.load(v + p_v, mask=m_tv, other=0.).to(tl.float32)
        b_u = dot(b_M, (b_v * b_beta[:, None]), DT, PRECISION, WIDEN)
        tl.store(u + p_v, b_u.to(u.dtype.element_ty), mask=m_tv)
