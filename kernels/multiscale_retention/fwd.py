"""Triton forward of multi-timescale diagonal retention (LIA-MTR, eqs. 3-5).

Grid (C / BC, N blocks of BT tokens, B): each program walks its BT tokens once with the S
memories of its BC channels in registers ([BS, BC] fp32), so [B, T, S, C] is never stored.
Two kernels: ``block_end`` (end state of each block from a zero start) feeds the scan in
``scan.py``; ``output`` re-walks each block from its true start state and writes o.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.triton_utils import autotune

WARP_CONFIGS = [triton.Config({}, num_warps=w) for w in (1, 2, 4)]


@autotune(WARP_CONFIGS, key=["C", "S", "BT", "BC"])
@triton.jit(do_not_specialize=["T"])
def multiscale_retention_fwd_kernel_block_end(
    k, v, gate, log_decays, block_end, T,
    C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr,
    GATE_PER_CHANNEL: tl.constexpr,
):
    i_c, i_n, i_b = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    NT = tl.cdiv(T, BT)
    o_c = i_c * BC + tl.arange(0, BC)
    m_c = o_c < C
    o_s = tl.arange(0, BS)
    m_s = o_s < S
    b_decay = tl.exp(tl.load(log_decays + o_s, mask=m_s, other=0.0).to(tl.float32))
    b_h = tl.zeros([BS, BC], dtype=tl.float32)
    t0 = i_n * BT
    for i in range(0, tl.minimum(BT, T - t0)):
        i_t = i_b * T + t0 + tl.cast(i, tl.int64)
        p_x = i_t * C + o_c
        b_u = tl.load(k + p_x, mask=m_c, other=0.0).to(tl.float32) * tl.load(v + p_x, mask=m_c, other=0.0).to(tl.float32)
        if GATE_PER_CHANNEL:
            b_u *= tl.load(gate + p_x, mask=m_c, other=0.0).to(tl.float32)
        else:
            b_u *= tl.load(gate + i_t).to(tl.float32)
        b_h = b_decay[:, None] * b_h + b_u[None, :]
    p_h = ((i_b * NT + i_n) * S + o_s[:, None]) * C + o_c[None, :]
    tl.store(block_end + p_h, b_h, mask=m_s[:, None] & m_c[None, :])


@autotune(WARP_CONFIGS, key=["C", "S", "BT", "BC"])
@triton.jit(do_not_specialize=["T"])
def multiscale_retention_fwd_kernel_output(
    q, k, v, gate, mix, log_decays, block_start, o, final_state, T,
    C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr,
    GATE_PER_CHANNEL: tl.constexpr,
):
    i_c, i_n, i_b = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    NT = tl.cdiv(T, BT)
    o_c = i_c * BC + tl.arange(0, BC)
    m_c = o_c < C
    o_s = tl.arange(0, BS)
    m_s = o_s < S
    m_h = m_s[:, None] & m_c[None, :]
    b_decay = tl.exp(tl.load(log_decays + o_s, mask=m_s, other=0.0).to(tl.float32))
    b_h = tl.load(block_start + ((i_b * NT + i_n) * S + o_s[:, None]) * C + o_c[None, :], mask=m_h, other=0.0)
    t0 = i_n * BT
    for i in range(0, tl.minimum(BT, T - t0)):
        i_t = i_b * T + t0 + tl.cast(i, tl.int64)
        p_x = i_t * C + o_c
        b_u = tl.load(k + p_x, mask=m_c, other=0.0).to(tl.float32) * tl.load(v + p_x, mask=m_c, other=0.0).to(tl.float32)
        if GATE_PER_CHANNEL:
            b_u *= tl.load(gate + p_x, mask=m_c, other=0.0).to(tl.float32)
        else:
            b_u *= tl.load(gate + i_t).to(tl.float32)
        b_h = b_decay[:, None] * b_h + b_u[None, :]
        b_mix = tl.load(mix + i_t * S + o_s, mask=m_s, other=0.0).to(tl.float32)
        b_q = tl.load(q + p_x, mask=m_c, other=0.0).to(tl.float32)
        b_o = b_q * tl.sum(b_mix[:, None] * b_h, 0)
        tl.store(o + p_x, b_o.to(o.dtype.element_ty), mask=m_c)
    if i_n == NT - 1:
        tl.store(final_state + (i_b * S + o_s[:, None]) * C + o_c[None, :], b_h, mask=m_h)
