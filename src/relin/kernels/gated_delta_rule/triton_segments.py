"""Triton kernels of the segmented (context-parallel) serial passes of the chunked gated delta rule; the scheme,
its bound and when it runs are in ``segments.py``.

A carry program owns one (segment x head) and one block of BV columns: a block of the state's V columns (the
segment's carry) or, when the segment needs it, a block of the K columns of its transition matrix, which the same
recurrence yields from the identity with U (forward) or dO and the intra-chunk d_delta (backward) taken as zero.
The chunk steps are those of ``gdn_fwd_kernel_state`` and ``gdn_bwd_kernel_state``, without their stores.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.chunk_tables import CHUNK_SIZE, locate_sequence
from ..common.dot import dot, dot_mode
from ..common.triton_utils import autotune, tile
from .segments import TRUNCATION_LOG_BOUND, SegmentPlan
from .state_configs import BWD_STATE_CONFIGS, FWD_STATE_CONFIGS, parallel_width


@triton.jit
def _carry_columns(i_v, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """(value block?, K offsets, their mask, the block's column offsets, their mask, the mask of value columns (none
    in a transition block), the starting [BK, BV] block: zeros for a value block, the identity's columns for a
    transition block). Scalar conditions enter masks as column limits (the interpreter refuses a mask combined
    with a scalar)."""
    NV = tl.cdiv(V, BV)
    value = i_v < NV
    o_k = tl.arange(0, BK)
    o_c = tl.where(value, i_v, i_v - NV) * BV + tl.arange(0, BV)
    m_c = o_c < tl.where(value, V, K)
    m_value = o_c < tl.where(value, V, 0)
    b_S = tl.where((o_k[:, None] == o_c[None, :]) & (o_c < tl.where(value, 0, K))[None, :], 1., 0.)
    return value, o_k, o_k < K, o_c, m_c, m_value, b_S


@triton.jit
def _store_carry(b_S, carry, trans, fallback, i_sh, i_v, fb, active, value, o_k, m_k, o_c,
                 K: tl.constexpr, V: tl.constexpr):
    m_carry = o_c < tl.where(active & value, V, 0)
    m_trans = o_c < tl.where(active & (value == 0), K, 0)
    tl.store(carry + i_sh * K * V + o_k[:, None] * V + o_c[None, :], b_S, mask=m_k[:, None] & m_carry[None, :])
    tl.store(trans + i_sh * K * K + o_k[:, None] * K + o_c[None, :], b_S, mask=m_k[:, None] & m_trans[None, :])
    if i_v == 0:
        tl.store(fallback + i_sh, fb.to(tl.int32))


@autotune(configs=FWD_STATE_CONFIGS, key=["WIDTH", "H", "K", "V", "BT", "L"])
@triton.jit(do_not_specialize=["T", "WIDTH"])
def gdn_fwd_kernel_carry(
    k, w, u, b_cum, chunk_bound, carry, trans, fallback, seg_cu, seg_offsets, seg_info, T, WIDTH,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    L: tl.constexpr, LOG_BOUND: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    """The state a segment hands on from a zero entering state, over its last chunks only where the gates allow
    (``carry`` [NS, H, K, V] fp32); else over all of it, with its transition (``trans`` [NS, H, K, K] fp32) and
    ``fallback`` set. Nothing for the last segment of a sequence."""
    DT = w.dtype.element_ty
    i_v, i_sh = tl.program_id(0), tl.program_id(1)
    i_sh = tl.cast(i_sh, tl.int64)
    i_s, i_h = i_sh // H, i_sh % H
    bos, eos, boc = locate_sequence(seg_cu, seg_offsets, i_s)
    NT = tl.cdiv(eos - bos, BT)
    o_l = tl.arange(0, L)
    m_l = o_l < NT
    # Bound exponents of the chunks from each one to the segment's end: the carry may start at the last chunk j
    # whose suffix is below the bound (everything before it is mapped through a transition of norm < e^bound).
    b_c = tl.load(chunk_bound + (boc + o_l) * H + i_h, mask=m_l, other=0.)
    b_suffix = tl.cumsum(b_c, 0, reverse=True)
    j0 = tl.max(tl.where(m_l & (b_suffix < LOG_BOUND), o_l, -1), 0)
    fb = j0 < 0
    value, o_k, m_k, o_c, m_c, m_value, b_S = _carry_columns(i_v, K, V, BK, BV)
    active = (i_s != tl.load(seg_info + i_s * 3 + 2)) & (value | fb)
    o_t = tl.arange(0, BT)
    for i in range(tl.where(active, tl.maximum(j0, 0), NT), NT):
        i_c = tl.cast(i, tl.int64)
        r_t = bos + i_c * BT + o_t
        m_t = r_t < eos
        b_w = tl.load(w + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)
        b_u = tl.load(u + (r_t[:, None] * H + i_h) * V + o_c[None, :], mask=m_t[:, None] & m_value[None, :],
                      other=0.).to(tl.float32)
        b_d = b_u - dot(b_w, b_S, DT, PRECISION, WIDEN)
        b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
        b_last = tl.load(b_cum + (tl.minimum(bos + i_c * BT + BT, eos) - 1) * H + i_h)
        b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        b_S = b_S * tl.exp(b_last) + dot(b_kt, b_d * tl.exp(b_last - b_b)[:, None], DT, PRECISION, WIDEN)
    _store_carry(b_S, carry, trans, fallback, i_sh, i_v, fb, active, value, o_k, m_k, o_c, K, V)


@autotune(configs=BWD_STATE_CONFIGS, key=["WIDTH", "H", "K", "V", "BT", "L"])
@triton.jit(do_not_specialize=["T", "WIDTH"])
def gdn_bwd_kernel_carry(
    q, k, w, b_cum, do, dd_intra, chunk_bound, carry, trans, fallback, seg_cu, seg_offsets, seg_info, scale, T,
    WIDTH, H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
    BV: tl.constexpr, L: tl.constexpr, LOG_BOUND: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    """The gradient of the state entering a segment from its own outputs, a zero gradient leaving it, over its
    first chunks only where the gates allow (``carry``); else over all of it, with the transpose of its transition
    (``trans``) and ``fallback`` set. Nothing for the first segment of a sequence."""
    DT = w.dtype.element_ty
    i_v, i_sh = tl.program_id(0), tl.program_id(1)
    i_sh = tl.cast(i_sh, tl.int64)
    i_s, i_h = i_sh // H, i_sh % H
    bos, eos, boc = locate_sequence(seg_cu, seg_offsets, i_s)
    NT = tl.cdiv(eos - bos, BT)
    o_l = tl.arange(0, L)
    m_l = o_l < NT
    # The carry may end at the first chunk e whose prefix (chunks 0..e) is below the bound.
    b_c = tl.load(chunk_bound + (boc + o_l) * H + i_h, mask=m_l, other=0.)
    b_prefix = tl.cumsum(b_c, 0)
    e0 = tl.min(tl.where(m_l & (b_prefix < LOG_BOUND), o_l, L), 0)
    fb = e0 >= L
    value, o_k, m_k, o_c, m_c, m_value, b_dS = _carry_columns(i_v, K, V, BK, BV)
    active = (i_s != tl.load(seg_info + i_s * 3 + 1)) & (value | fb)
    e_end = tl.where(fb, NT - 1, e0)
    o_t = tl.arange(0, BT)
    for i_r in range(0, tl.where(active, e_end + 1, 0)):
        i_c = tl.cast(e_end - i_r, tl.int64)
        r_t = bos + i_c * BT + o_t
        m_t = r_t < eos
        m_tc = m_t[:, None] & m_value[None, :]
        b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
        b_last = tl.load(b_cum + (tl.minimum(bos + i_c * BT + BT, eos) - 1) * H + i_h)
        b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)
        b_qt = tl.load(q + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        b_wt = tl.load(w + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        p_v = (r_t[:, None] * H + i_h) * V + o_c[None, :]
        b_do = tl.load(do + p_v, mask=m_tc, other=0.)
        b_dd = (tl.load(dd_intra + p_v, mask=m_tc, other=0.)
                + dot(b_k, b_dS, DT, PRECISION, WIDEN) * tl.exp(b_last - b_b)[:, None])
        b_dog = b_do.to(tl.float32) * (scale * tl.exp(b_b))[:, None]
        b_dS = b_dS * tl.exp(b_last) + dot(b_qt, b_dog, DT, PRECISION, WIDEN)
        b_dS -= dot(b_wt, b_dd, DT, PRECISION, WIDEN)
    _store_carry(b_dS, carry, trans, fallback, i_sh, i_v, fb, active, value, o_k, m_k, o_c, K, V)


@triton.jit
def gdn_kernel_resolve(
    carry, trans, fallback, s0, out, seg_info,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, BKK: tl.constexpr,
    MAXS: tl.constexpr, REVERSE: tl.constexpr, USE_S0: tl.constexpr,
):
    """``out`` [NS, H, K, V] fp32: the state entering each segment (forward), or the gradient of the state leaving
    it (REVERSE), from the carries: the nearest carry of a segment without fallback (earlier forward, later
    backward), else the sequence's ``s0`` (initial state, or final-state gradient) or zero; then through each
    fallback segment in between, x <- carry + trans x (exact fp32 products, the running x kept in ``out``)."""
    i_v, i_sh = tl.program_id(0), tl.program_id(1)
    i_sh = tl.cast(i_sh, tl.int64)
    i_s, i_h = i_sh // H, i_sh % H
    i_n = tl.load(seg_info + i_s * 3).to(tl.int64)
    first = tl.load(seg_info + i_s * 3 + 1).to(tl.int64)
    last = tl.load(seg_info + i_s * 3 + 2).to(tl.int64)
    segs = first + tl.arange(0, MAXS)
    m_seg = segs <= last
    b_fb = tl.load(fallback + segs * H + i_h, mask=m_seg, other=1)
    if REVERSE:
        j = tl.min(tl.where(m_seg & (segs > i_s) & (b_fb == 0), segs, last + 1), 0)
        from_carry = j <= last
        from_s0 = j > last
        start = tl.where(from_carry, j - 1, last)
        steps = start - i_s
    else:
        j = tl.max(tl.where(m_seg & (segs < i_s) & (b_fb == 0), segs, first - 1), 0)
        from_carry = j >= first
        from_s0 = j < first
        start = tl.where(from_carry, j + 1, first)
        steps = i_s - start
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    m_kv = (o_k < K)[:, None] & m_v[None, :]
    o_kv = o_k[:, None] * V + o_v[None, :]
    m_k = (o_k < K)[:, None]
    b_x = tl.load(carry + (tl.where(from_carry, j, 0) * H + i_h) * K * V + o_kv,
                  mask=m_k & (o_v < tl.where(from_carry, V, 0))[None, :], other=0.)
    if USE_S0:
        b_x += tl.load(s0 + (i_n * H + i_h) * K * V + o_kv, mask=m_k & (o_v < tl.where(from_s0, V, 0))[None, :],
                       other=0.)
    p_out = out + i_sh * K * V
    tl.store(p_out + o_kv, b_x, mask=m_kv)
    for step in range(0, steps):
        if REVERSE:
            i = start - step
        else:
            i = start + step
        tl.debug_barrier()
        b_acc = tl.load(carry + (i * H + i_h) * K * V + o_kv, mask=m_kv, other=0.)
        for kk in range(0, K, BKK):
            o_kk = kk + tl.arange(0, BKK)
            b_a = tl.load(trans + (i * H + i_h) * K * K + o_k[:, None] * K + o_kk[None, :])
            b_y = tl.load(p_out + o_kk[:, None] * V + o_v[None, :], mask=m_v[None, :], other=0.)
            b_acc += tl.dot(b_a, b_y, input_precision="ieee")
        tl.debug_barrier()
        tl.store(p_out + o_kv, b_acc, mask=m_kv)


def _carries(plan: SegmentPlan, H, K, V, device):
    NS = plan.num_segments
    return (torch.empty(NS, H, K, V, dtype=torch.float32, device=device),
            torch.empty(NS, H, K, K, dtype=torch.float32, device=device),
            torch.empty(NS * H, dtype=torch.int32, device=device),
            torch.empty(NS, H, K, V, dtype=torch.float32, device=device))


def _resolve(plan, carry, trans, fallback, s0, out, H, K, V, reverse):
    BV = 32
    gdn_kernel_resolve[(triton.cdiv(V, BV), plan.num_segments * H)](
        carry, trans, fallback, s0, out, plan.info, H=H, K=K, V=V, BK=K, BV=BV, BKK=32, MAXS=plan.max_segments,
        REVERSE=reverse, USE_S0=s0 is not None, num_warps=4)
    return out


def fwd_segment_states(plan: SegmentPlan, k, w, u, b_cum, chunk_bound, h0):
    """The state entering every segment of ``plan`` [NS, H, K, V] fp32 (h0 [N, H, K, V] or None)."""
    _, T, H, K = k.shape
    V = u.shape[-1]
    precision, widen = dot_mode(w.dtype)
    carry, trans, fallback, out = _carries(plan, H, K, V, k.device)
    gdn_fwd_kernel_carry[lambda meta: (triton.cdiv(V, meta["BV"]) + triton.cdiv(K, meta["BV"]),
                                       plan.num_segments * H)](
        k, w, u, b_cum, chunk_bound, carry, trans, fallback, plan.cu_seqlens, plan.chunk_offsets, plan.info, T,
        WIDTH=parallel_width(plan.num_segments, H), H=H, K=K, V=V, BT=CHUNK_SIZE, BK=tile(K, 256), L=plan.chunks,
        LOG_BOUND=TRUNCATION_LOG_BOUND, PRECISION=precision, WIDEN=widen)
    return _resolve(plan, carry, trans, fallback, h0, out, H, K, V, reverse=False)


def bwd_segment_states(plan: SegmentPlan, q, k, w, b_cum, do, dd_intra, chunk_bound, dht, scale):
    """The gradient of the state leaving every segment of ``plan`` [NS, H, K, V] fp32 (dht [N, H, K, V] or None)."""
    _, T, H, K = k.shape
    V = do.shape[-1]
    precision, widen = dot_mode(w.dtype)
    carry, trans, fallback, out = _carries(plan, H, K, V, k.device)
    gdn_bwd_kernel_carry[lambda meta: (triton.cdiv(V, meta["BV"]) + triton.cdiv(K, meta["BV"]),
                                       plan.num_segments * H)](
        q, k, w, b_cum, do, dd_intra, chunk_bound, carry, trans, fallback, plan.cu_seqlens, plan.chunk_offsets,
        plan.info, scale, T, WIDTH=parallel_width(plan.num_segments, H), H=H, K=K, V=V, BT=CHUNK_SIZE,
        BK=tile(K, 256), L=plan.chunks, LOG_BOUND=TRUNCATION_LOG_BOUND, PRECISION=precision, WIDEN=widen)
    return _resolve(plan, carry, trans, fallback, dht, out, H, K, V, reverse=True)
