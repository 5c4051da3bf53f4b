"""Triton scan over T-block boundary states (second level of the two-level recurrence).

Start states obey H_n = a_{n-1} H_{n-1} + E_{n-1}, H_0 = initial state, with a_n = λ_s^{len_n}
(computed here from log λ_s and the block lengths, rather than by half a dozen tiny torch launches)
and E_n a block's end state from a zero start (notes/chunked-algorithms.md §3). Grid (C / BC, S, B):
each program scans BN blocks at a time with ``tl.associative_scan`` and carries the last state,
so a 512-block scan takes a few dependent steps instead of 512 (a sequential walk is latency-bound).
With REVERSE the blocks are taken last to first: the backward's right carries R_n.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl


@triton.jit
def first_order_combine(a_left, x_left, a_right, x_right):
    return a_left * a_right, a_right * x_left + x_right


@triton.jit(do_not_specialize=["T", "NT"])
def multiscale_retention_kernel_block_scan(
    log_decays, block_end, initial_state, start, T, NT,
    S: tl.constexpr, C: tl.constexpr, BT: tl.constexpr, BN: tl.constexpr, BC: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, REVERSE: tl.constexpr,
):
    i_c, i_s, i_b = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    o_c = i_c * BC + tl.arange(0, BC)
    m_c = o_c < C
    b_log_decay = tl.load(log_decays + i_s).to(tl.float32)
    if USE_INITIAL_STATE:
        b_carry = tl.load(initial_state + (i_b * S + i_s) * C + o_c, mask=m_c, other=0.0).to(tl.float32)
    else:
        b_carry = tl.zeros([BC], dtype=tl.float32)
    o_row = tl.arange(0, BN)
    for i_chunk in range(0, tl.cdiv(NT, BN)):
        # position n of the scan holds (a, E) of the block before it, position 0 the identity (1, 0).
        o_pos = tl.cast(i_chunk, tl.int64) * BN + o_row
        m_prev = (o_pos >= 1) & (o_pos <= NT)
        o_prev = NT - o_pos if REVERSE else o_pos - 1
        b_len = tl.where(m_prev, tl.minimum(BT, T - o_prev * BT), 0).to(tl.float32)
        b_a = tl.exp(b_len * b_log_decay)  # the identity's 1 where masked
        p_e = ((i_b * NT + o_prev[:, None]) * S + i_s) * C + o_c[None, :]
        b_e = tl.load(block_end + p_e, mask=m_prev[:, None] & m_c[None, :], other=0.0)
        b_a = tl.broadcast_to(b_a[:, None], [BN, BC])
        b_acc_a, b_acc_e = tl.associative_scan((b_a, b_e), 0, first_order_combine)
        b_h = b_acc_a * b_carry[None, :] + b_acc_e
        o_blk = NT - 1 - o_pos if REVERSE else o_pos
        p_h = ((i_b * NT + o_blk[:, None]) * S + i_s) * C + o_c[None, :]
        tl.store(start + p_h, b_h, mask=(o_pos < NT)[:, None] & m_c[None, :])
        b_carry = tl.sum(tl.where((o_row == BN - 1)[:, None], b_h, 0.0), 0)


def scan_block_states(log_decays, block_len, T, block_end, initial_state, reverse=False):
    """[B, N, S, C] start states (or, reversed, right carries) of blocks of ``block_len`` tokens (the last one
    may be short) from log_decays [S] (fp32) and block_end [B, N, S, C]."""
    B, NT, S, C = block_end.shape
    start = torch.empty_like(block_end)
    BC = min(64, triton.next_power_of_2(C))
    BN = min(64, max(16, triton.next_power_of_2(NT)))
    multiscale_retention_kernel_block_scan[(triton.cdiv(C, BC), S, B)](
        log_decays, block_end, initial_state, start, T, NT, S=S, C=C, BT=block_len, BN=BN, BC=BC,
        USE_INITIAL_STATE=initial_state is not None, REVERSE=reverse, num_warps=4)
    return start
