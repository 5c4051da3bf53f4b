"""Per-chunk WY representation of the gated delta rule (notes/chunked-algorithms.md §2).

For each chunk and head, in parallel: b = in-chunk cumsum of g, the unit lower-triangular
M^{-1} = (I + tril_{-1}(diag(beta)(R * K K^T)))^{-1} by forward substitution, and
W = M^{-1} diag(beta exp(b)) K, U = M^{-1} diag(beta) V.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.triton_utils import autotune


@autotune(configs=[triton.Config({}, num_warps=w) for w in (4, 8)], key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_fwd_kernel_wy(
    k, v, g, beta, b_cum, m_inv, w, u, cu_seqlens, chunk_indices, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
    BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, PRECISION: tl.constexpr,
):
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg = tl.cast(i_tg, tl.int64)
    i_n = tl.load(chunk_indices + i_tg * 2).to(tl.int64)
    i_c = tl.load(chunk_indices + i_tg * 2 + 1).to(tl.int64)
    bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    DT = k.dtype.element_ty

    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    m_t = r_t < eos
    o_k = tl.arange(0, BK)
    m_k = o_k < K
    b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)
    b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
    b_g = tl.load(g + r_t * H + i_h, mask=m_t, other=0.).to(tl.float32)
    b_beta = tl.load(beta + r_t * H + i_h, mask=m_t, other=0.).to(tl.float32)
    b_b = tl.cumsum(b_g, 0)
    tl.store(b_cum + r_t * H + i_h, b_b, mask=m_t)

    m_strict = (o_t[:, None] > o_t[None, :]) & m_t[:, None] & m_t[None, :]
    # Masked before exp: above the diagonal b_i - b_j > 0 can overflow.
    b_R = tl.exp(tl.where(m_strict, b_b[:, None] - b_b[None, :], 0.))
    b_A = tl.where(m_strict, b_beta[:, None] * b_R * tl.dot(b_k, b_kt, input_precision=PRECISION), 0.)

    # Row i of (I + A)^{-1} is e_i - sum_{j<i} A_ij row_j; rows >= i are still zero when read.
    b_M = tl.zeros([BT, BT], dtype=tl.float32)
    for i in range(0, BT):
        b_a = tl.sum(tl.where(o_t[:, None] == i, b_A, 0.), 0)
        b_row = tl.where(o_t == i, 1., 0.) - tl.sum(b_a[:, None] * b_M, 0)
        b_M = tl.where(o_t[:, None] == i, b_row[None, :], b_M)
    tl.store(m_inv + ((i_tg * H + i_h) * BT + o_t[:, None]) * BT + o_t[None, :], b_M)

    b_kbg = (b_k * (b_beta * tl.exp(b_b))[:, None]).to(DT)
    b_w = tl.dot(b_M.to(DT), b_kbg, input_precision=PRECISION)
    tl.store(w + (r_t[:, None] * H + i_h) * K + o_k[None, :], b_w.to(w.dtype.element_ty),
             mask=m_t[:, None] & m_k[None, :])
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        b_v = tl.load(v + p_v, mask=m_tv, other=0.)
        b_u = tl.dot(b_M.to(DT), (b_v * b_beta[:, None]).to(DT), input_precision=PRECISION)
        tl.store(u + p_v, b_u.to(u.dtype.element_ty), mask=m_tv)
