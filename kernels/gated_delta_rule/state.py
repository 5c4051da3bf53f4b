"""Sequential passes over the chunks of each sequence: the only serial part of the chunked form.

Forward (notes/chunked-algorithms.md §2), per chunk with entering state S_0:
    delta = U - W S_0,    S_C = exp(b_C) S_0 + (diag(exp(b_C - b)) K)^T delta.
Backward, carrying dS (gradient of the state leaving the chunk), with the intra-chunk term
d_delta_intra = scale tril(R * Q K^T)^T dO from intra_dv.py:
    d_delta = d_delta_intra + diag(exp(b_C - b)) K dS,
    dS_0 = exp(b_C) dS + scale (diag(exp(b)) Q)^T dO - W^T d_delta.
One program per (V-block, sequence x head); the [K, BV] state stays in registers in fp32. ``WIDTH``
(``parallel_width``: sequences x heads, bucketed) is only an autotuning key: the best BV depends on how many
programs the pass has (at B=1 narrow V blocks, at B=8 wide ones, 0.39 vs 0.22 ms at (8, 4K, 16, 128)).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.triton_utils import autotune
from .dot import dot

# Configs kept from an H200 sweep of 8 (bf16, K = V = 128, ms at (1, 64K, 16, 128) / (8, 4K, 16, 128), fwd):
# BV=16 2 warps 3 stages 1.23 / 0.39, BV=32 4 warps 3 stages 1.29 / 0.33, BV=64 4 warps 2 stages 1.91 / 0.22;
# 8 warps, 1 stage and BV=16 at 4 warps were never best. Narrow V blocks multiply the programs for small N*H,
# which is all the parallelism a serial pass has (N*H = 16, V = 128: 128 programs at BV = 16, on 132 SMs).
# The backward holds three more tiles: at 2 warps it spills kilobytes per thread (offline sm_90), so its
# sweep was BV=32 4 warps 3 stages 1.70 ms at 64K, BV=16 4 warps 1.97, BV=32 8 warps 2.42, BV=64 4 warps 2.63.
# fp32 inputs (the tests) spill at 4 warps and overflow shared memory at 3 stages: BV=32 8 warps 2 stages is
# kept for them (it compiled and ran for fp32 in every H200 test run).
_FWD_CONFIGS = [triton.Config({"BV": bv}, num_warps=warps, num_stages=stages)
                for bv, warps, stages in ((16, 2, 3), (32, 4, 3), (32, 4, 2), (64, 4, 2), (32, 8, 2))]
_BWD_CONFIGS = [triton.Config({"BV": bv}, num_warps=warps, num_stages=stages)
                for bv, warps, stages in ((32, 4, 3), (16, 4, 2), (32, 8, 2), (64, 4, 2))]


def parallel_width(sequences: int, heads: int) -> int:
    """Sequences x heads rounded up to a power of two, at most 1024: few distinct autotuning keys."""
    return min(triton.next_power_of_2(sequences * heads), 1024)


@autotune(configs=_FWD_CONFIGS, key=["WIDTH", "H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T", "WIDTH"])
def gdn_fwd_kernel_state(
    k, w, u, b_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, WIDTH,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = w.dtype.element_ty
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_nh = tl.cast(i_nh, tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    boh = tl.load(chunk_offsets + i_n).to(tl.int64)
    NT = tl.cdiv(eos - bos, BT)

    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_kv = m_k[:, None] & m_v[None, :]
    o_kv = o_k[:, None] * V + o_v[None, :]
    b_S = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_INITIAL_STATE:
        b_S += tl.load(h0 + i_nh * K * V + o_kv, mask=m_kv, other=0.).to(tl.float32)
    for i_s in range(0, NT):
        i_c = tl.cast(i_s, tl.int64)
        tl.store(h + ((boh + i_c) * H + i_h) * K * V + o_kv, b_S.to(h.dtype.element_ty), mask=m_kv)
        r_t = bos + i_c * BT + o_t
        m_t = r_t < eos
        m_tv = m_t[:, None] & m_v[None, :]
        b_w = tl.load(w + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.).to(tl.float32)
        p_u = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        b_u = tl.load(u + p_u, mask=m_tv, other=0.).to(tl.float32)
        b_d = b_u - dot(b_w, b_S, DT, PRECISION, WIDEN)
        tl.store(v_new + p_u, b_d.to(v_new.dtype.element_ty), mask=m_tv)

        b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
        b_last = tl.load(b_cum + (tl.minimum(bos + i_c * BT + BT, eos) - 1) * H + i_h)
        b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        # The decays scale the [BT, BV] delta rather than the [K, BT] keys: a quarter of the work per chunk.
        b_S = b_S * tl.exp(b_last) + dot(b_kt, b_d * tl.exp(b_last - b_b)[:, None], DT, PRECISION, WIDEN)
    if STORE_FINAL_STATE:
        tl.store(ht + i_nh * K * V + o_kv, b_S, mask=m_kv)


@autotune(configs=_BWD_CONFIGS, key=["WIDTH", "H", "K", "V", "BT"])
@triton.jit(do_not_specialize=["T", "WIDTH"])
def gdn_bwd_kernel_state(
    q, k, w, b_cum, do, dd_intra, dh, dv_new, dht, dh0, cu_seqlens, chunk_offsets, scale, T, WIDTH,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_FINAL_STATE_GRADIENT: tl.constexpr, STORE_INITIAL_STATE_GRADIENT: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = w.dtype.element_ty
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_nh = tl.cast(i_nh, tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    boh = tl.load(chunk_offsets + i_n).to(tl.int64)
    NT = tl.cdiv(eos - bos, BT)

    o_t = tl.arange(0, BT)
    o_k = tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    m_kv = m_k[:, None] & m_v[None, :]
    o_kv = o_k[:, None] * V + o_v[None, :]
    b_dS = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_FINAL_STATE_GRADIENT:
        b_dS += tl.load(dht + i_nh * K * V + o_kv, mask=m_kv, other=0.).to(tl.float32)
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
