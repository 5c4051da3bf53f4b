"""Chunked decayed linear attention: Triton forward and backward on GPU, chunked PyTorch on CPU.

S_t = exp(g_t) S_{t-1} + k_t v_tᵀ, o_t = scale · S_tᵀ q_t (notes/chunked-algorithms.md §1; Hedgehog with
g = None, Mamba-2/SSD with g = dt·A), optionally normalized by q_t·z_t (see ``inputs``).
"""
from __future__ import annotations

import torch

from ..common.backend import use_triton
from .chunk_index import build_chunk_index
from .inputs import per_sequence, prepare, unpack_normalizer
from .torch_chunk import chunk_decayed_linear_attn_torch
from .triton_bwd import chunk_bwd_dh, chunk_bwd_dqk, chunk_bwd_dv
from . import triton_fwd
from .triton_fwd import CHUNK_SIZE, chunk_fwd_h, chunk_fwd_o


class ChunkDecayedLinearAttnFunction(torch.autograd.Function):
    """Packed inputs: q, k [1, T, H, K], v [1, T, H, V] (one dtype), g [1, T, H] fp32 or None,
    initial_state [N, H, K, V] fp32 or None. Returns o [1, T, H, V] (out_dtype) and the fp32 final state.

    ``fp32_backward`` (the normalized form): the incoming gradient of the packed [numerator, denominator]
    output is [do/d, -(do·o)/d], whose two parts cancel in every product with [v, 1] down to do·(v - o)/d.
    Near a sequence start o ≈ v, so rounding do to 16 bits (or tf32 products) leaves errors of order
    |do·v|/d against a true value ~1e-6/d smaller: dq at T = 1 came out 8x its own size. The backward then
    runs on fp32 operands with fp32-accurate products (``dot_args(precise=True)``) and fp32 states.
    """

    @staticmethod
    def forward(ctx, q, k, v, g, scale, initial_state, output_final_state, index, out_dtype, fp32_backward):
        h, final_state, gc = chunk_fwd_h(k, v, g, initial_state, output_final_state, index)
        o = chunk_fwd_o(q, k, v, gc, h, scale, index, out_dtype)
        # gc rather than g: no cumsum to redo in the backward, whose host time per call rivals its kernels' time
        ctx.save_for_backward(q, k, v, gc, initial_state, h if triton_fwd.SAVE_STATES else None)
        ctx.scale, ctx.index, ctx.fp32_backward = scale, index, fp32_backward
        return o, final_state

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, gc, initial_state, h = ctx.saved_tensors
        scale, index, precise = ctx.scale, ctx.index, ctx.fp32_backward
        input_dtype = q.dtype
        if precise:
            q, k, v, h = q.float(), k.float(), v.float(), None
        do = do.to(q.dtype).contiguous()
        dht = dht.float().contiguous() if dht is not None else None
        if h is None:
            h, _, _ = chunk_fwd_h(k, v, gc, initial_state, False, index, precise, cumsum=False)
        dh, dh0 = chunk_bwd_dh(q, do, gc, dht, initial_state is not None, scale, index, precise)
        dv = chunk_bwd_dv(q, k, do, gc, dh, scale, index, precise)
        dq, dk, dg = chunk_bwd_dqk(q, k, v, do, gc, h, dh, scale, index, precise)
        dq, dk, dv = (x.to(input_dtype) for x in (dq, dk, dv))
        return dq, dk, dv, dg, None, dh0, None, None, None, None


def _triton_core(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, out_dtype, normalize):
    B, T, H, K = q.shape
    index = build_chunk_index(B, T, cu_seqlens, CHUNK_SIZE, q.device)
    packed = [x.reshape(1, B * T, *x.shape[2:]).contiguous() for x in (q, k, v)]
    g = g.float().reshape(1, B * T, H).contiguous() if g is not None else None
    initial_state = initial_state.float().contiguous() if initial_state is not None else None
    o, final_state = ChunkDecayedLinearAttnFunction.apply(*packed, g, scale, initial_state, output_final_state,
                                                          index, out_dtype, normalize)
    return o.reshape(B, T, H, -1), final_state


def _torch_core(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, out_dtype, normalize):
    # fp32 throughout, so the normalized gradient's cancellation (see the Function) costs nothing here
    o, final_state = per_sequence(lambda q, k, v, g, s: chunk_decayed_linear_attn_torch(q, k, v, g, scale, s),
                                  q, k, v, g, initial_state, cu_seqlens)
    return o.to(out_dtype), (final_state if output_final_state else None)


def chunk_decayed_linear_attn(q, k, v, g=None, scale=None, normalize=False, initial_state=None,
                              output_final_state=False, cu_seqlens=None):
    """Decayed linear attention over whole sequences.

    Args:
        q, k: [B, T, H, K]; v: [B, T, H, V] (K may differ from V); any float dtype (k, v cast to q's).
        g: [B, T, H] log decay (≤ 0 for a contraction), or None for plain linear attention.
        scale: multiplies q·k, default K^-0.5; unused when ``normalize``.
        normalize: divide by q_t·z_t + 1e-6 with z_t = exp(g_t) z_{t-1} + k_t.
        initial_state: S [N, H, K, V], or (S, z [N, H, K]) when ``normalize``; N = B, or sequences in cu_seqlens.
        output_final_state: also return the state after the last token (fp32, same structure).
        cu_seqlens: LongTensor [N+1] of packed sequence offsets (B must be 1).
    Returns:
        o [B, T, H, V] in q's dtype, and the final state or None.
    """
    k, v, scale, initial_state, out_dtype = prepare(q, k, v, g, scale, normalize, initial_state, cu_seqlens)
    core = _triton_core if use_triton(q) else _torch_core
    o, final_state = core(q, k, v, g, scale, initial_state, output_final_state, cu_seqlens, out_dtype, normalize)
    if normalize:
        o, final_state = unpack_normalizer(o, final_state, q.dtype)
    return o, final_state
