"""Intra-chunk part of the delta gradient, parallel over chunks (notes/chunked-algorithms.md §2):

    d_delta_intra = scale tril(R * Q K^T)^T dO,    R_ij = exp(b_i - b_j),

one program per (chunk, head). It depends on no state, so it is kept out of the sequential reverse
pass (state.py), which only adds diag(exp(b_C - b)) K dS.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.chunk_tables import locate_chunk
from ..common.triton_utils import autotune
from .dot import dot


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
    i_tg = tl.cast(i_tg, tl.int64)
    i_c, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_tg)

    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    m_t = r_t < eos
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
