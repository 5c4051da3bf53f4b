"""Chunked gated delta rule (OPAL's Gated DeltaNet; Yang, Kautz, Hatamizadeh 2025): public op.

Triton pipeline, chunk size 64 (notes/chunked-algorithms.md §2):
forward  ``wy`` (two kernels, parallel over chunks) -> ``state`` (sequential over chunks) -> ``output`` (parallel);
backward ``intra_dv`` (parallel) -> reverse ``state`` pass (sequential) -> two ``grad`` kernels (parallel).
Forward keeps its intermediates (cumulative decays, M^{-1}, W, states, deltas) for backward rather than
recomputing them: on the H200 at (1, 64K, 16, 128) the rerun cost a fifth of fwd+bwd.

Precision, as in fla: with 16-bit inputs the intermediates (W, U, per-chunk states, deltas and their
gradients) are stored in that dtype and every product takes 16-bit operands with fp32 accumulation;
the running state, decays and the final state stay fp32. With fp32 inputs everything is fp32
with exact (ieee) products. On the H200 the 16-bit path halves the intermediates' traffic and runs
the products on the bf16 tensor cores (benchmarks/kernel_profile.py; notes in benchmarks/notes/gdn-h200.md).
"""
from __future__ import annotations

import torch
import triton

from ..common.backend import use_triton
from ..common.chunk_tables import equal_length_chunks, varlen_chunks
from ..common.interpreter_dot import dot_mode
from .grad import gdn_bwd_kernel_grad_output, gdn_bwd_kernel_grad_wy
from .intra_dv import gdn_bwd_kernel_intra_dv
from .output import gdn_fwd_kernel_output
from .state import gdn_bwd_kernel_state, gdn_fwd_kernel_state, parallel_width
from .torch_chunk import torch_chunk_gated_delta_rule
from .utils import check_inputs, l2norm
from .wy import gdn_fwd_kernel_kkt_inverse, gdn_fwd_kernel_wu

BT = 64
MAX_HEAD_DIM = 256


def _compute_dtype(*xs: torch.Tensor) -> torch.dtype:
    """The first 16-bit input dtype (bf16/fp16 tensor-core products, 16-bit intermediates); fp32 if none."""
    return next((x.dtype for x in xs if x.dtype != torch.float32), torch.float32)


def _forward_pipeline(q, k, v, g, beta, h0, cu_seqlens, chunk_indices, chunk_offsets, store_final):
    """Run wy + state on packed inputs [1, T, H, *]; return the intermediates the other kernels read."""
    _, T, H, K = k.shape
    V = v.shape[-1]
    N, NT = cu_seqlens.numel() - 1, chunk_indices.shape[0]
    BK = max(triton.next_power_of_2(K), 16)
    dtype = _compute_dtype(v, k, q)
    precision, widen = dot_mode(dtype)
    b_cum = torch.empty(1, T, H, dtype=torch.float32, device=k.device)
    m_inv = torch.empty(NT, H, BT, BT, dtype=dtype, device=k.device)
    w = torch.empty(k.shape, dtype=dtype, device=k.device)
    u = torch.empty(v.shape, dtype=dtype, device=k.device)
    gdn_fwd_kernel_kkt_inverse[(NT, H)](
        k, g, beta, b_cum, m_inv, cu_seqlens, chunk_indices, T, H=H, K=K, BT=BT, PRECISION=precision, WIDEN=widen)
    gdn_fwd_kernel_wu[(NT, H)](
        k, v, beta, b_cum, m_inv, w, u, cu_seqlens, chunk_indices, T,
        H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
    h = torch.empty(NT, H, K, V, dtype=dtype, device=k.device)
    v_new = torch.empty(v.shape, dtype=dtype, device=k.device)
    ht = torch.empty(N, H, K, V, dtype=torch.float32, device=k.device) if store_final else None
    gdn_fwd_kernel_state[lambda meta: (triton.cdiv(V, meta["BV"]), N * H)](
        k, w, u, b_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, parallel_width(N, H),
        H=H, K=K, V=V, BT=BT, BK=BK, USE_INITIAL_STATE=h0 is not None, STORE_FINAL_STATE=store_final,
        PRECISION=precision, WIDEN=widen)
    return b_cum, m_inv, w, h, v_new, ht


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    """Triton chunked gated delta rule on packed inputs q, k [1, T, H, K], v [1, T, H, V], g, beta [1, T, H],
    sequence boundaries ``cu_seqlens`` [N+1] and the chunk tables of ``common.chunk_tables``, all on q's device."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, chunk_indices,
                chunk_offsets):
        q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
        h0 = None if initial_state is None else initial_state.contiguous()
        b_cum, m_inv, w, h, v_new, ht = _forward_pipeline(
            q, k, v, g, beta, h0, cu_seqlens, chunk_indices, chunk_offsets, output_final_state)
        _, T, H, K = k.shape
        V = v.shape[-1]
        precision, widen = dot_mode(h.dtype)
        o = torch.empty_like(v)
        gdn_fwd_kernel_output[lambda meta: (triton.cdiv(V, meta["BV"]), chunk_indices.shape[0], H)](
            q, k, v_new, h, b_cum, o, cu_seqlens, chunk_indices, scale, T,
            H=H, K=K, V=V, BT=BT, BK=max(triton.next_power_of_2(K), 16), PRECISION=precision, WIDEN=widen)
        ctx.save_for_backward(q, k, v, beta, h0, cu_seqlens, chunk_indices, chunk_offsets, b_cum, m_inv, w, h, v_new)
        ctx.scale, ctx.g_dtype = scale, g.dtype
        return o, ht

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, beta, h0, cu_seqlens, chunk_indices, chunk_offsets, b_cum, m_inv, w, h, v_new = ctx.saved_tensors
        _, T, H, K = k.shape
        V = v.shape[-1]
        N, NT = cu_seqlens.numel() - 1, chunk_indices.shape[0]
        BK = max(triton.next_power_of_2(K), 16)
        do = do.contiguous()
        precision, widen = dot_mode(h.dtype)
        dh = torch.empty(NT, H, K, V, dtype=h.dtype, device=k.device)
        dv_new = torch.empty(v.shape, dtype=h.dtype, device=k.device)
        dh0 = torch.empty(N, H, K, V, dtype=torch.float32, device=k.device) if h0 is not None else None
        dd_intra = torch.empty(v.shape, dtype=torch.float32, device=k.device)
        gdn_bwd_kernel_intra_dv[(NT, H)](
            q, k, b_cum, do, dd_intra, cu_seqlens, chunk_indices, ctx.scale, T,
            H=H, K=K, V=V, BT=BT, BK=BK, BV=min(max(triton.next_power_of_2(V), 16), 64),
            PRECISION=precision, WIDEN=widen)
        gdn_bwd_kernel_state[lambda meta: (triton.cdiv(V, meta["BV"]), N * H)](
            q, k, w, b_cum, do, dd_intra, dh, dv_new, None if dht is None else dht.contiguous(), dh0,
            cu_seqlens, chunk_offsets, ctx.scale, T, parallel_width(N, H),
            H=H, K=K, V=V, BT=BT, BK=BK, USE_FINAL_STATE_GRADIENT=dht is not None,
            STORE_INITIAL_STATE_GRADIENT=h0 is not None, PRECISION=precision, WIDEN=widen)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        dg = torch.empty(beta.shape, dtype=torch.float32, device=beta.device)
        dbeta = torch.empty(beta.shape, dtype=torch.float32, device=beta.device)
        dk_part = torch.empty(k.shape, dtype=torch.float32, device=k.device)
        db_part = torch.empty(beta.shape, dtype=torch.float32, device=beta.device)
        gdn_bwd_kernel_grad_output[(NT, H)](
            q, k, b_cum, h, dh, v_new, do, dq, dk_part, db_part, cu_seqlens, chunk_indices, ctx.scale, T,
            H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
        gdn_bwd_kernel_grad_wy[(NT, H)](
            k, v, b_cum, beta, m_inv, h, dv_new, dk_part, db_part, dk, dv, dg, dbeta, cu_seqlens, chunk_indices, T,
            H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
        return dq, dk, dv, dg.to(ctx.g_dtype), dbeta.to(beta.dtype), None, dh0, None, None, None, None


def chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    use_qk_l2norm_in_kernel: bool = False,
    cu_seqlens: torch.LongTensor | None = None,
):
    """Gated delta rule, chunked (fla 0.6.0 ``chunk_gated_delta_rule`` semantics).

    Per head: S_t = exp(g_t)(I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = scale S_t^T q_t.

    Args:
        q, k (torch.Tensor): [B, T, H, K], K <= 256.
        v (torch.Tensor): [B, T, H, V], V <= 256.
        g (torch.Tensor): [B, T, H] log-space decay (<= 0).
        beta (torch.Tensor): [B, T, H] write strength.
        scale (float, Optional): Default: K ** -0.5.
        initial_state (torch.Tensor, Optional): [N, H, K, V]; N = B, or the number of sequences.
        output_final_state (bool): also return the final states [N, H, K, V] in fp32.
        use_qk_l2norm_in_kernel (bool): L2-normalise q and k along K first (differentiably).
        cu_seqlens (torch.LongTensor, Optional): [N+1] boundaries of sequences packed along T; B must be 1.
    Returns:
        o [B, T, H, V] in v's dtype, and the final state (or None).
    """
    check_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    if use_qk_l2norm_in_kernel:
        # Kept in fp32: rounding unit vectors back to 16 bits would be the largest error of the op.
        q, k = l2norm(q), l2norm(k)
    if not use_triton(q):
        o, final = torch_chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, cu_seqlens)
        return o.to(v.dtype), (final if output_final_state else None)
    if max(K, V) > MAX_HEAD_DIM:
        raise ValueError(f"head dims K={K}, V={V}: the Triton kernels support at most {MAX_HEAD_DIM}")
    if cu_seqlens is None:
        cu_seqlens, chunk_indices, chunk_offsets = equal_length_chunks(B, T, BT, q.device)
        q, k, v, g, beta = (x.reshape(1, B * T, *x.shape[2:]) for x in (q, k, v, g, beta))
    else:
        chunk_indices, chunk_offsets = varlen_chunks(cu_seqlens.cpu(), BT, q.device)
        cu_seqlens = cu_seqlens.to(q.device)
    o, final = ChunkGatedDeltaRuleFunction.apply(
        q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens, chunk_indices, chunk_offsets)
    return o.reshape(B, T, H, V), final
