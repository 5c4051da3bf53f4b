"""Launchers of the two-level Triton kernels of multi-timescale diagonal retention (LIA-MTR, eqs. 3-5).

Forward: ``block_end`` kernel -> block-state scan -> ``output`` kernel. Backward: ``forward_sweep``
(dq, dmix, block adjoints) -> reversed block scan -> ``reverse_sweep`` (dk, dv, dgate, d initial state).
With one block (block_len >= T) the scans and the ``block_end`` kernel are skipped.
"""
from __future__ import annotations

import torch
import triton

from .bwd import multiscale_retention_bwd_kernel_forward_sweep, multiscale_retention_bwd_kernel_reverse_sweep
from .fwd import multiscale_retention_fwd_kernel_block_end, multiscale_retention_fwd_kernel_output
from .block_scan import scan_block_states

TARGET_PROGRAMS = 4096  # about the H200's resident limit (132 SMs x 32 blocks): one wave
MIN_BLOCK_LEN = 64
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


def _launch_meta(q, mix, gate, block_len):
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
    meta, grid = _launch_meta(q, mix, gate, block_len)
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


def retention_bwd(q, k, v, gate, mix, log_decays, start, do, dht, block_len=None):
    """Returns dq, dk, dv, dgate, dmix, d(initial state) [B, S, C] fp32."""
    B, T, C = q.shape
    S = mix.shape[-1]
    meta, grid = _launch_meta(q, mix, gate, block_len)
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
