"""Triton forward of multi-timescale diagonal retention (LIA-MTR, eqs. 3-5).

Grid (C / BC, N blocks of BT tokens, B): each program walks its BT tokens once with the S
memories of its BC channels in registers ([BS, BC] fp32), so [B, T, S, C] is never stored.
Two kernels: ``block_end`` (end state of each block from a zero start) feeds the scan in
``block_scan.py``; ``output`` re-walks each block from its true start state and writes o.
The token loops are memory-latency bound, so each iteration issues a later token's loads before its own
arithmetic (software pipelining by hand): ``PREFETCH`` tokens ahead, 1 or 2, picked by the autotuner
(at most 32 programs are resident per SM, so bytes in flight per program set the bandwidth).
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.triton_utils import autotune

FWD_CONFIGS = [triton.Config({"PREFETCH": p}, num_warps=w) for p in (2, 1) for w in (1, 2, 4)]


@triton.jit
def load_write(k, v, gate, p_x, p_gate, mask_c, GATE_PER_CHANNEL: tl.constexpr):
    """Raw k, v and gate of one token (gate: [BC] per channel, a scalar per token)."""
    b_k = tl.load(k + p_x, mask=mask_c, other=0.0)
    b_v = tl.load(v + p_x, mask=mask_c, other=0.0)
    if GATE_PER_CHANNEL:
        b_gate = tl.load(gate + p_x, mask=mask_c, other=0.0)
    else:
        b_gate = tl.load(gate + p_gate)
    return b_k, b_v, b_gate


@triton.jit
def ahead(i, n, DISTANCE: tl.constexpr):
    """Offset from token i to the token DISTANCE ahead, clamped to the block's last token (re-read at the end)."""
    return tl.minimum(tl.cast(i, tl.int64) + DISTANCE, n - 1) - tl.cast(i, tl.int64)


@triton.jit
def write_value(b_k, b_v, b_gate):
    """u_t = gate_t ⊙ k_t ⊙ v_t in fp32 (eq. 3)."""
    return b_gate.to(tl.float32) * b_k.to(tl.float32) * b_v.to(tl.float32)


@autotune(FWD_CONFIGS, key=["C", "S", "BT", "BC"])
@triton.jit(do_not_specialize=["T"])
def multiscale_retention_fwd_kernel_block_end(
    k, v, gate, log_decays, block_end, T,
    C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr,
    GATE_PER_CHANNEL: tl.constexpr, PREFETCH: tl.constexpr,
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
    n = tl.minimum(BT, T - t0)
    p_gate = i_b * T + t0
    p_x = p_gate * C + o_c
    b_k, b_v, b_gate = load_write(k, v, gate, p_x, p_gate, m_c, GATE_PER_CHANNEL)
    if PREFETCH == 2:
        d = ahead(0, n, 1)
        c_k, c_v, c_gate = load_write(k, v, gate, p_x + d * C, p_gate + d, m_c, GATE_PER_CHANNEL)
    for i in range(0, n):
        d = ahead(i, n, PREFETCH)
        n_k, n_v, n_gate = load_write(k, v, gate, p_x + d * C, p_gate + d, m_c, GATE_PER_CHANNEL)
        b_h = b_decay[:, None] * b_h + write_value(b_k, b_v, b_gate)[None, :]
        if PREFETCH == 2:
            b_k, b_v, b_gate = c_k, c_v, c_gate
            c_k, c_v, c_gate = n_k, n_v, n_gate
        else:
            b_k, b_v, b_gate = n_k, n_v, n_gate
        p_x += C
        p_gate += 1
    p_h = ((i_b * NT + i_n) * S + o_s[:, None]) * C + o_c[None, :]
    tl.store(block_end + p_h, b_h, mask=m_s[:, None] & m_c[None, :])


@autotune(FWD_CONFIGS, key=["C", "S", "BT", "BC"])
@triton.jit(do_not_specialize=["T"])
def multiscale_retention_fwd_kernel_output(
    q, k, v, gate, mix, log_decays, block_start, o, final_state, T,
    C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr,
    GATE_PER_CHANNEL: tl.constexpr, PREFETCH: tl.constexpr,
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
    n = tl.minimum(BT, T - t0)
    p_gate = i_b * T + t0
    p_x = p_gate * C + o_c
    b_k, b_v, b_gate = load_write(k, v, gate, p_x, p_gate, m_c, GATE_PER_CHANNEL)
    b_q = tl.load(q + p_x, mask=m_c, other=0.0)
    b_mix = tl.load(mix + p_gate * S + o_s, mask=m_s, other=0.0)
    if PREFETCH == 2:
        d = ahead(0, n, 1)
        c_k, c_v, c_gate = load_write(k, v, gate, p_x + d * C, p_gate + d, m_c, GATE_PER_CHANNEL)
        c_q = tl.load(q + p_x + d * C, mask=m_c, other=0.0)
        c_mix = tl.load(mix + (p_gate + d) * S + o_s, mask=m_s, other=0.0)
    for i in range(0, n):
        d = ahead(i, n, PREFETCH)
        n_k, n_v, n_gate = load_write(k, v, gate, p_x + d * C, p_gate + d, m_c, GATE_PER_CHANNEL)
        n_q = tl.load(q + p_x + d * C, mask=m_c, other=0.0)
        n_mix = tl.load(mix + (p_gate + d) * S + o_s, mask=m_s, other=0.0)
        b_h = b_decay[:, None] * b_h + write_value(b_k, b_v, b_gate)[None, :]
        b_o = b_q.to(tl.float32) * tl.sum(b_mix.to(tl.float32)[:, None] * b_h, 0)
        tl.store(o + p_x, b_o.to(o.dtype.element_ty), mask=m_c)
        if PREFETCH == 2:
            b_k, b_v, b_gate, b_q, b_mix = c_k, c_v, c_gate, c_q, c_mix
            c_k, c_v, c_gate, c_q, c_mix = n_k, n_v, n_gate, n_q, n_mix
        else:
            b_k, b_v, b_gate, b_q, b_mix = n_k, n_v, n_gate, n_q, n_mix
        p_x += C
        p_gate += 1
    if i_n == NT - 1:
        tl.store(final_state + (i_b * S + o_s[:, None]) * C + o_c[None, :], b_h, mask=m_h)
