"""Chunked decayed linear attention: the public op. Triton forward and backward on CUDA tensors
(``triton_fwd``, ``triton_bwd``), the chunked PyTorch form on CPU tensors (``torch_chunk``).

S_t = exp(g_t) S_{t-1} + k_t v_tᵀ, o_t = scale · S_tᵀ q_t (notes/chunked-algorithms.md §1; Hedgehog with
g = None and normalize, Mamba-2/SSD with g = dt·A), optionally normalized by q_t·z_t + eps.
"""
from __future__ import annotations

import torch

from ..common.backend import use_triton
from ..common.chunk_tables import chunk_tables
from .ref import check_inputs, default_scale, pack_normalizer, per_sequence, unpack_normalizer
from .torch_chunk import chunk_decayed_linear_attn_torch
from .triton_bwd import chunk_bwd_dh, chunk_bwd_dqkg, chunk_bwd_dv, normalizer_grad
from .triton_fwd import chunk_cumsum, chunk_fwd_h, chunk_fwd_o


class ChunkDecayedLinearAttnFunction(torch.autograd.Function):
    """q, k [B, T, H, K], v [B, T, H, V] (one dtype), g [B, T, H] fp32 or None, initial state S_0 [N, H, K, V] and
    (normalized) z_0 [N, H, K] fp32 or None, the call's ``ChunkTables``. Returns o [B, T, H, V] in q's dtype and
    the final S and z in fp32 (or None).

    The kernels see the batch packed as one sequence [1, B·T, H, D]; packing here rather than around the call
    keeps view nodes out of the autograd graph (each costs host time in every backward)."""

    @staticmethod
    def forward(ctx, q, k, v, g, scale, h0, z0, output_final_state, normalize, tables):
        B, T, H, _ = q.shape
        q, k, v = (x.reshape(1, B * T, H, x.shape[-1]).contiguous() for x in (q, k, v))
        g = g.reshape(1, B * T, H).contiguous() if g is not None else None
        gc = chunk_cumsum(g, tables) if g is not None else None
        h, z, ht, zt = chunk_fwd_h(k, v, gc, h0, z0, output_final_state, normalize, tables)
        o, o32, rden = chunk_fwd_o(q, k, v, gc, h, z, scale, normalize, any(ctx.needs_input_grad), tables)
        ctx.save_for_backward(q, k, v, gc, h, z, o32, rden)
        ctx.scale, ctx.normalize, ctx.tables, ctx.has_h0, ctx.batch = scale, normalize, tables, h0 is not None, B
        return o.reshape(B, T, H, -1), ht, zt

    @staticmethod
    def backward(ctx, do, dht, dzt):
        q, k, v, gc, h, z, o32, rden = ctx.saved_tensors
        scale, tables = ctx.scale, ctx.tables
        do = do.reshape(v.shape).contiguous()
        dht = dht.contiguous() if dht is not None else None
        dzt = dzt.contiguous() if dzt is not None and ctx.normalize else None
        dd = normalizer_grad(do, o32, rden) if ctx.normalize else None
        dh, dz, dh0, dz0 = chunk_bwd_dh(q, do, gc, rden, dd, dht, dzt, ctx.has_h0, scale, ctx.normalize, tables)
        dv = chunk_bwd_dv(q, k, do, gc, rden, dh, scale, tables)
        dq, dk, dg = chunk_bwd_dqkg(q, k, v, do, gc, h, dh, z, dz, rden, dd, scale, tables)
        B, T = ctx.batch, q.shape[1] // ctx.batch
        dq, dk, dv = (x.reshape(B, T, *x.shape[2:]) for x in (dq, dk, dv))
        dg = dg.reshape(B, T, -1) if dg is not None else None
        return dq, dk, dv, dg, None, dh0, dz0, None, None, None


def _triton_core(q, k, v, g, scale, initial_state, output_final_state, bounds, normalize):
    B, T, _, _ = q.shape
    tables = chunk_tables(B, T, bounds, q.device)
    g = g.float() if g is not None else None
    h0 = z0 = None
    if initial_state is not None:
        h0, z0 = initial_state if normalize else (initial_state, None)
        h0 = h0.float().contiguous()
        z0 = z0.float().contiguous() if z0 is not None else None
    o, ht, zt = ChunkDecayedLinearAttnFunction.apply(q, k, v, g, scale, h0, z0, output_final_state, normalize,
                                                     tables)
    final_state = ((ht, zt) if normalize else ht) if output_final_state else None
    return o, final_state


def _torch_core(q, k, v, g, scale, initial_state, output_final_state, bounds, normalize):
    # fp32 throughout, so the normalizer packed as an extra value column costs no accuracy here
    if normalize:
        v, initial_state = pack_normalizer(v, initial_state)
    o, final_state = per_sequence(lambda q, k, v, g, s: chunk_decayed_linear_attn_torch(q, k, v, g, scale, s),
                                  q, k, v, g, initial_state, bounds)
    final_state = final_state if output_final_state else None
    if normalize:
        return unpack_normalizer(o, final_state, q.dtype)
    return o.to(q.dtype), final_state


def chunk_decayed_linear_attn(q, k, v, g=None, scale=None, normalize=False, initial_state=None,
                              output_final_state=False, cu_seqlens=None, backend=None):
    """Decayed linear attention over whole sequences.

    Args:
        q, k: [B, T, H, K]; v: [B, T, H, V] (K may differ from V); any float dtype (k, v cast to q's).
        g: [B, T, H] log decay (≤ 0 for a contraction), or None for plain linear attention.
        scale: multiplies q·k, default K^-0.5; unused when ``normalize``.
        normalize: divide by q_t·z_t + 1e-6 with z_t = exp(g_t) z_{t-1} + k_t.
        initial_state: S [N, H, K, V], or (S, z [N, H, K]) when ``normalize``; N = B, or sequences in cu_seqlens.
        output_final_state: also return the state after the last token (fp32, same structure).
        cu_seqlens: LongTensor [N+1] of packed sequence offsets (B must be 1). Read on the host once per call: on
            the CPU it costs no device synchronization.
        backend: "auto" (Triton on CUDA tensors, PyTorch on CPU), "triton" or "torch". Default: the environment
            variable RELIN_KERNEL_BACKEND, else "auto".
    Returns:
        o [B, T, H, V] in q's dtype, and the final state or None.
    """
    bounds = check_inputs(q, k, v, g, initial_state, normalize, cu_seqlens)
    k, v = k.to(q.dtype), v.to(q.dtype)
    core = _triton_core if use_triton(q, backend) else _torch_core
    return core(q, k, v, g, default_scale(q, scale, normalize), initial_state, output_final_state, bounds, normalize)
