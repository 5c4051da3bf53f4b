"""Triton forward of multi-timescale diagonal retention (LIA-MTR, eqs. 3-5).

Grid (C / BC, N blocks of BT tokens, B): each program walks its BT tokens once with the S
memories of its BC channels in registers ([BS, BC] fp32), so [B, T, S, C] is never stored.
Three kernels: ``block_end`` (end state of each block from a zero start), ``block_scan`` (the start state of
every block from those, a first-order scan over blocks) and ``output`` (each block re-walked from its true
start state, writing o). With one block (block_len >= T) the first two are skipped.
The token loops are memory-latency bound, so each iteration issues a later token's loads before its own
arithmetic (software pipelining by hand): ``PREFETCH`` tokens ahead, 1 or 2, picked by the autotuner
(at most 32 programs are resident per SM, so bytes in flight per program set the bandwidth).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.chunk_tables import CHUNK_SIZE
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
def load_token(q, k, v, gate, mix, p_x, p_gate, o_s, m_c, m_s, S: tl.constexpr, GATE_PER_CHANNEL: tl.constexpr):
    """Raw k, v, gate, q and mix of one token (mix: [BS])."""
    b_k, b_v, b_gate = load_write(k, v, gate, p_x, p_gate, m_c, GATE_PER_CHANNEL)
    b_q = tl.load(q + p_x, mask=m_c, other=0.0)
    b_mix = tl.load(mix + p_gate * S + o_s, mask=m_s, other=0.0)
    return b_k, b_v, b_gate, b_q, b_mix


@triton.jit
def token_block(i_c, log_decays, T, C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
                BS: tl.constexpr):
    """The block of a program of grid (C / BC, N blocks, B) with channel block ``i_c``: (block index, batch row,
    number of blocks, channel offsets and mask, scale offsets and mask, the [BS, BC] state mask, the decays λ_s
    [BS] in fp32, the block's first token and its number of tokens)."""
    i_n, i_b = tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    NT = tl.cdiv(T, BT)
    o_c = i_c * BC + tl.arange(0, BC)
    m_c = o_c < C
    o_s = tl.arange(0, BS)
    m_s = o_s < S
    b_decay = tl.exp(tl.load(log_decays + o_s, mask=m_s, other=0.0).to(tl.float32))
    t0 = i_n * BT
    return i_n, i_b, NT, o_c, m_c, o_s, m_s, m_s[:, None] & m_c[None, :], b_decay, t0, tl.minimum(BT, T - t0)


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
    i_c = tl.program_id(0)
    i_n, i_b, NT, o_c, m_c, o_s, m_s, m_h, b_decay, t0, n = token_block(i_c, log_decays, T, C, S, BT, BC, BS)
    b_h = tl.zeros([BS, BC], dtype=tl.float32)
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
    tl.store(block_end + p_h, b_h, mask=m_h)


@autotune(FWD_CONFIGS, key=["C", "S", "BT", "BC"])
@triton.jit(do_not_specialize=["T"])
def multiscale_retention_fwd_kernel_output(
    q, k, v, gate, mix, log_decays, block_start, o, final_state, T,
    C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr,
    GATE_PER_CHANNEL: tl.constexpr, PREFETCH: tl.constexpr,
):
    i_c = tl.program_id(0)
    i_n, i_b, NT, o_c, m_c, o_s, m_s, m_h, b_decay, t0, n = token_block(i_c, log_decays, T, C, S, BT, BC, BS)
    b_h = tl.load(block_start + ((i_b * NT + i_n) * S + o_s[:, None]) * C + o_c[None, :], mask=m_h, other=0.0)
    p_gate = i_b * T + t0
    p_x = p_gate * C + o_c
    b_k, b_v, b_gate, b_q, b_mix = load_token(q, k, v, gate, mix, p_x, p_gate, o_s, m_c, m_s, S, GATE_PER_CHANNEL)
    if PREFETCH == 2:
        d = ahead(0, n, 1)
        c_k, c_v, c_gate, c_q, c_mix = load_token(q, k, v, gate, mix, p_x + d * C, p_gate + d, o_s, m_c, m_s, S,
                                                  GATE_PER_CHANNEL)
    for i in range(0, n):
        d = ahead(i, n, PREFETCH)
        n_k, n_v, n_gate, n_q, n_mix = load_token(q, k, v, gate, mix, p_x + d * C, p_gate + d, o_s, m_c, m_s, S,
                                                  GATE_PER_CHANNEL)
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


# The block scan: start states obey H_n = a_{n-1} H_{n-1} + E_{n-1}, H_0 = initial state, with a_n = λ_s^{len_n}
# (computed in the kernel from log λ_s and the block lengths) and E_n a block's end state from a zero start
# (notes/chunked-algorithms.md §3). Grid (C / BC, S, B): each program scans BN blocks at a time with
# ``tl.associative_scan`` and carries the last state, so a 512-block scan takes a few dependent steps instead of
# 512 (a sequential walk is latency-bound). With REVERSE the blocks are taken last to first: the backward's right
# carries R_n.
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


TARGET_PROGRAMS = 4096  # about the H200's resident limit (132 SMs x 32 blocks): one wave
MIN_BLOCK_LEN = CHUNK_SIZE
# Scales a program keeps in registers ([BS, BC] fp32 per memory).
MAX_SCALES = 32
# Channels per program. The loops are bound by bytes in flight (one token prefetched per program, and at most
# 32 resident programs per SM), so a wider block moves more bytes per step: 256 bf16 channels are 512 B per
# tensor per token.
MAX_CHANNEL_BLOCK = 256


def channel_block(C: int) -> int:
    return min(MAX_CHANNEL_BLOCK, triton.next_power_of_2(C))


def default_block_len(B: int, T: int, C: int) -> int:
    """Tokens per block: split T until about TARGET_PROGRAMS programs run, never below 64 tokens."""
    blocks_wanted = max(1, TARGET_PROGRAMS // (B * triton.cdiv(C, channel_block(C))))
    return max(MIN_BLOCK_LEN, triton.next_power_of_2(triton.cdiv(T, blocks_wanted)))


def launch_meta(q, mix, gate, block_len):
    B, T, C = q.shape
    S = mix.shape[-1]
    BT = block_len or default_block_len(B, T, C)
    BC = channel_block(C)
    meta = dict(C=C, S=S, BT=BT, BC=BC, BS=max(2, triton.next_power_of_2(S)), GATE_PER_CHANNEL=gate.shape[-1] == C)
    return meta, (triton.cdiv(C, BC), triton.cdiv(T, BT), B)


def retention_fwd(q, k, v, gate, mix, log_decays, initial_state, block_len=None):
    """Returns o [B, T, C] (q's dtype), final state [B, S, C] fp32, block start states [B, N, S, C]."""
    B, T, C = q.shape
    S = mix.shape[-1]
    meta, grid = launch_meta(q, mix, gate, block_len)
    n_blocks = grid[1]
    if n_blocks == 1:
        start = (initial_state.float() if initial_state is not None else q.new_zeros(B, S, C, dtype=torch.float32))
        start = start.reshape(B, 1, S, C).contiguous()
    else:
        block_end = q.new_empty(B, n_blocks, S, C, dtype=torch.float32)
        multiscale_retention_fwd_kernel_block_end[grid](k, v, gate, log_decays, block_end, T, **meta)
        h0 = initial_state.float().contiguous() if initial_state is not None else None
        start = scan_block_states(log_decays, meta["BT"], T, block_end, h0)
    o = torch.empty_like(q)
    final_state = q.new_empty(B, S, C, dtype=torch.float32)
    multiscale_retention_fwd_kernel_output[grid](q, k, v, gate, mix, log_decays, start, o, final_state, T, **meta)
    return o, final_state, start
