"""Per-chunk output of the gated delta rule (notes/chunked-algorithms.md §2):
O = scale (diag(exp(b)) Q S_0 + tril(R * Q K^T) delta), one program per (V-block, chunk, head).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.chunk_tables import locate_chunk
from ..common.triton_utils import autotune
from .dot import dot

# BV=64 won over 32 on the H200 (0.56 vs 0.76 ms at (1, 64K, 16, 128)); fla's chunk_fwd_o also offers one program
# per chunk and head (BV = 128 at 8 warps), which computes Q K^T once instead of once per V block.
_CONFIGS = [triton.Config({"BV": bv}, num_warps=w, num_stages=3) for bv, w in ((64, 4), (128, 8), (32, 4))]


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T"])
def gdn_fwd_kernel_output(
    q, k, v_new, h, b_cum, o, cu_seqlens, chunk_indices, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = h.dtype.element_ty
    i_v, i_tg, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_tg = tl.cast(i_tg, tl.int64)
    i_c, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_tg)

    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    m_t = r_t < eos
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    b_q = tl.load(q + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.).to(tl.float32)
    b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.).to(tl.float32)
    b_S = tl.load(h + (i_tg * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.).to(tl.float32)
    p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
    m_tv = m_t[:, None] & m_v[None, :]
    b_d = tl.load(v_new + p_v, mask=m_tv, other=0.).to(tl.float32)
    b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)

    m_lower = (o_t[:, None] >= o_t[None, :]) & m_t[:, None] & m_t[None, :]
    b_P = dot(b_q, b_kt, DT, PRECISION, WIDEN)
    b_P = tl.where(m_lower, b_P * tl.exp(tl.where(m_lower, b_b[:, None] - b_b[None, :], 0.)), 0.)
    b_o = dot(b_q, b_S, DT, PRECISION, WIDEN) * tl.exp(b_b)[:, None]
    b_o += dot(b_P, b_d, DT, PRECISION, WIDEN)
    tl.store(o + p_v, (scale * b_o).to(o.dtype.element_ty), mask=m_tv)
