"""Triton backward of multi-timescale diagonal retention (notes/chunked-algorithms.md §3).

With p_t = do_t ⊙ q_t and the adjoint a_{t,s} = mix_{t,s} p_t + λ_s a_{t+1,s} of M_{t,s}:
- ``forward_sweep`` re-walks each block from its saved start state: dq = do ⊙ m,
  dmix_{t,s} = Σ_c p_t M_{t,s} (one partial per channel block), and the block's adjoint from a zero
  right carry, stored as λ G_n with G_n = Σ_{j in block} λ^{j - start} mix_j p_j, for the reverse
  block scan;
- ``reverse_sweep`` walks each block backwards from its true right carry R_n (= λ a of the token
  after the block): du = Σ_s a, dk = du ⊙ gate ⊙ v, dv = du ⊙ gate ⊙ k, dgate = du ⊙ k ⊙ v
  (one partial per channel block when the gate is per token); block 0 writes d(initial state) = λ a_1.
Grid (C / BC, N blocks, B) as in the forward; the token loops prefetch one token ahead likewise.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.triton_utils import autotune
from .triton_fwd import ahead, launch_meta, load_token, scan_block_states, token_block, write_value

WARP_CONFIGS = [triton.Config({}, num_warps=w) for w in (1, 2, 4)]


@autotune(WARP_CONFIGS, key=["C", "S", "BT", "BC"])
@triton.jit(do_not_specialize=["T"])
def multiscale_retention_bwd_kernel_forward_sweep(
    q, k, v, gate, mix, do, log_decays, block_start, dq, dmix_partial, block_adjoint, T,
    B: tl.constexpr, C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
    BS: tl.constexpr, GATE_PER_CHANNEL: tl.constexpr,
):
    i_c = tl.program_id(0).to(tl.int64)
    i_n, i_b, NT, o_c, m_c, o_s, m_s, m_h, b_decay, t0, n = token_block(i_c, log_decays, T, C, S, BT, BC, BS)
    p_h = ((i_b * NT + i_n) * S + o_s[:, None]) * C + o_c[None, :]
    b_h = tl.load(block_start + p_h, mask=m_h, other=0.0)
    b_g = tl.zeros([BS, BC], dtype=tl.float32)
    b_w = tl.full([BS], 1.0, dtype=tl.float32)
    p_gate = i_b * T + t0
    p_x = p_gate * C + o_c
    b_k, b_v, b_gate, b_q, b_mix = load_token(q, k, v, gate, mix, p_x, p_gate, o_s, m_c, m_s, S, GATE_PER_CHANNEL)
    b_do = tl.load(do + p_x, mask=m_c, other=0.0)
    for i in range(0, n):
        d = ahead(i, n, 1)
        n_k, n_v, n_gate, n_q, n_mix = load_token(q, k, v, gate, mix, p_x + d * C, p_gate + d, o_s, m_c, m_s, S,
                                                  GATE_PER_CHANNEL)
        n_do = tl.load(do + p_x + d * C, mask=m_c, other=0.0)
        b_h = b_decay[:, None] * b_h + write_value(b_k, b_v, b_gate)[None, :]
        b_mix32, b_do32 = b_mix.to(tl.float32), b_do.to(tl.float32)
        tl.store(dq + p_x, (b_do32 * tl.sum(b_mix32[:, None] * b_h, 0)).to(dq.dtype.element_ty), mask=m_c)
        b_p = b_do32 * b_q.to(tl.float32)
        tl.store(dmix_partial + ((i_c * B * T + p_gate) * S + o_s), tl.sum(b_h * b_p[None, :], 1), mask=m_s)
        b_g += (b_w * b_mix32)[:, None] * b_p[None, :]
        b_w *= b_decay
        b_k, b_v, b_gate, b_q, b_do, b_mix = n_k, n_v, n_gate, n_q, n_do, n_mix
        p_x += C
        p_gate += 1
    tl.store(block_adjoint + p_h, b_decay[:, None] * b_g, mask=m_h)


@autotune(WARP_CONFIGS, key=["C", "S", "BT", "BC"])
@triton.jit(do_not_specialize=["T"])
def multiscale_retention_bwd_kernel_reverse_sweep(
    q, k, v, gate, mix, do, log_decays, block_carry, dk, dv, dgate, dinitial_state, T,
    B: tl.constexpr, C: tl.constexpr, S: tl.constexpr, BT: tl.constexpr, BC: tl.constexpr,
    BS: tl.constexpr, GATE_PER_CHANNEL: tl.constexpr,
):
    i_c = tl.program_id(0).to(tl.int64)
    i_n, i_b, NT, o_c, m_c, o_s, m_s, m_h, b_decay, t0, n = token_block(i_c, log_decays, T, C, S, BT, BC, BS)
    b_r = tl.load(block_carry + ((i_b * NT + i_n) * S + o_s[:, None]) * C + o_c[None, :], mask=m_h, other=0.0)
    p_gate = i_b * T + t0 + n - 1
    p_x = p_gate * C + o_c
    b_k, b_v, b_gate, b_q, b_mix = load_token(q, k, v, gate, mix, p_x, p_gate, o_s, m_c, m_s, S, GATE_PER_CHANNEL)
    b_do = tl.load(do + p_x, mask=m_c, other=0.0)
    for i in range(0, n):
        d = ahead(i, n, 1)
        n_k, n_v, n_gate, n_q, n_mix = load_token(q, k, v, gate, mix, p_x - d * C, p_gate - d, o_s, m_c, m_s, S,
                                                  GATE_PER_CHANNEL)
        n_do = tl.load(do + p_x - d * C, mask=m_c, other=0.0)
        b_p = b_do.to(tl.float32) * b_q.to(tl.float32)
        b_a = b_mix.to(tl.float32)[:, None] * b_p[None, :] + b_r
        b_du = tl.sum(b_a, 0)
        b_r = b_decay[:, None] * b_a
        b_k32, b_v32, b_gate32 = b_k.to(tl.float32), b_v.to(tl.float32), b_gate.to(tl.float32)
        if GATE_PER_CHANNEL:
            tl.store(dgate + p_x, (b_du * b_k32 * b_v32).to(dgate.dtype.element_ty), mask=m_c)
        else:
            tl.store(dgate + i_c * B * T + p_gate, tl.sum(b_du * b_k32 * b_v32, 0))
        tl.store(dk + p_x, (b_du * b_gate32 * b_v32).to(dk.dtype.element_ty), mask=m_c)
        tl.store(dv + p_x, (b_du * b_gate32 * b_k32).to(dv.dtype.element_ty), mask=m_c)
        b_k, b_v, b_gate, b_q, b_do, b_mix = n_k, n_v, n_gate, n_q, n_do, n_mix
        p_x -= C
        p_gate -= 1
    if i_n == 0:
        tl.store(dinitial_state + (i_b * S + o_s[:, None]) * C + o_c[None, :], b_r, mask=m_h)


def retention_bwd(q, k, v, gate, mix, log_decays, start, do, dht, block_len=None):
    """Returns dq, dk, dv, dgate, dmix, d(initial state) [B, S, C] fp32."""
    B, T, C = q.shape
    S = mix.shape[-1]
    meta, grid = launch_meta(q, mix, gate, block_len)
    n_channel_blocks, n_blocks = grid[0], grid[1]
    dq = torch.empty_like(q)
    dmix_partial = q.new_empty(n_channel_blocks, B, T, S, dtype=torch.float32)
    block_adjoint = q.new_empty(B, n_blocks, S, C, dtype=torch.float32)
    multiscale_retention_bwd_kernel_forward_sweep[grid](
        q, k, v, gate, mix, do, log_decays, start, dq, dmix_partial, block_adjoint, T, B=B, **meta)
    dht = dht.float().contiguous() if dht is not None else None
    if n_blocks == 1:
        carry = (dht if dht is not None else q.new_zeros(B, S, C, dtype=torch.float32)).reshape(B, 1, S, C)
    else:
        # R_n = λ^{len_{n+1}} R_{n+1} + λ G_{n+1} with R_{N-1} = dht: the start-state scan, reversed.
        carry = scan_block_states(log_decays, meta["BT"], T, block_adjoint, dht, reverse=True)
    carry = carry.contiguous()
    dk, dv = torch.empty_like(k), torch.empty_like(v)
    per_channel = meta["GATE_PER_CHANNEL"]
    dgate = torch.empty_like(gate) if per_channel else q.new_empty(n_channel_blocks, B, T, dtype=torch.float32)
    dh0 = q.new_empty(B, S, C, dtype=torch.float32)
    multiscale_retention_bwd_kernel_reverse_sweep[grid](
        q, k, v, gate, mix, do, log_decays, carry, dk, dv, dgate, dh0, T, B=B, **meta)
    if not per_channel:
        dgate = dgate.sum(0).unsqueeze(-1).to(gate.dtype)
    return dq, dk, dv, dgate, dmix_partial.sum(0).to(mix.dtype), dh0
