"""Chunked gated delta rule (OPAL's Gated DeltaNet; Yang, Kautz, Hatamizadeh 2025): the public op.

Triton kernels on CUDA tensors (``triton_fwd``, ``triton_bwd``), the chunked PyTorch form on CPU tensors
(``torch_chunk``). The forward keeps its intermediates (cumulative decays, M^{-1}, W, per-chunk states, deltas)
for the backward rather than recomputing them, trading memory (per-chunk states: T/64 · H · K · V elements) for
a fifth of the fwd+bwd time at long T. A call that no gradient will reach (no input requires one, or autograd
is off) runs the same kernels outside autograd and drops them. Long sequences (16K tokens and more) over
few heads run their serial passes on segments side by side (``segments.py``: exact, decided from the lengths
alone; ``RELIN_GDN_CP=0`` walks whole sequences).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.backend import use_triton
from ..common.chunk_tables import chunk_tables
from ..common.triton_utils import tile
from .ref import check_inputs, check_triton_head_dims, l2norm
from .segments import segment_plan
from .torch_chunk import torch_chunk_gated_delta_rule
from .triton_bwd import chunk_gdn_bwd
from .triton_fwd import chunk_gdn_fwd


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    """Triton chunked gated delta rule on packed inputs q, k [1, T, H, K], v [1, T, H, V], g, beta [1, T, H],
    the ``ChunkTables`` of the call and its ``SegmentPlan`` (or None), all on q's device."""

    @staticmethod
    def forward(ctx, q, k, v, g, beta, scale, initial_state, output_final_state, tables, plan):
        q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
        h0 = None if initial_state is None else initial_state.contiguous()
        o, ht, saved = chunk_gdn_fwd(q, k, v, g, beta, scale, h0, tables, output_final_state, plan)
        ctx.save_for_backward(q, k, v, beta, h0, *saved)
        ctx.scale, ctx.g_dtype, ctx.tables, ctx.plan = scale, g.dtype, tables, plan
        return o, ht

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, beta, h0, *saved = ctx.saved_tensors
        dq, dk, dv, dg, dbeta, dh0 = chunk_gdn_bwd(
            q, k, v, beta, ctx.scale, h0, ctx.tables, saved, do.contiguous(),
            None if dht is None else dht.contiguous(), ctx.plan)
        return dq, dk, dv, dg.to(ctx.g_dtype), dbeta.to(beta.dtype), None, dh0, None, None, None


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
    backend: str | None = None,
):
    """Gated delta rule, chunked (fla 0.6.0 ``chunk_gated_delta_rule`` semantics).

    Per head: S_t = exp(g_t)(I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = scale S_t^T q_t.

    Args:
        q, k (torch.Tensor): [B, T, H, K]; K <= 256 on the Triton path.
        v (torch.Tensor): [B, T, H, V]; V <= 256 on the Triton path.
        g (torch.Tensor): [B, T, H] log-space decay (<= 0).
        beta (torch.Tensor): [B, T, H] write strength.
        scale (float, Optional): Default: K ** -0.5.
        initial_state (torch.Tensor, Optional): [N, H, K, V]; N = B, or the number of sequences.
        output_final_state (bool): also return the final states [N, H, K, V] in fp32.
        use_qk_l2norm_in_kernel (bool): L2-normalise q and k along K first (differentiably).
        cu_seqlens (torch.LongTensor, Optional): [N+1] boundaries of sequences packed along T; B must be 1.
            Read on the host once per call: on the CPU it costs no device synchronization.
        backend (str, Optional): "auto" (Triton on CUDA tensors, PyTorch on CPU), "triton" or "torch".
            Default: the environment variable RELIN_KERNEL_BACKEND, else "auto".
    Returns:
        o [B, T, H, V] in v's dtype, and the final state (or None).
    """
    N, bounds = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    triton_path = use_triton(q, backend)
    if triton_path:
        check_triton_head_dims(K, V)
    if use_qk_l2norm_in_kernel:
        # Kept in fp32: rounding unit vectors back to 16 bits would be the largest error of the op.
        q, k = l2norm(q), l2norm(k)
    if not triton_path:
        o, final = torch_chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, bounds)
        return o.to(v.dtype), (final if output_final_state else None)
    # Head dims are zero-padded to a whole tile (common.triton_utils.MIN_TILE), which changes no product, so the
    # kernels, the 8-warp gradient kernels above all, only ever see whole power-of-two tiles.
    Kp, Vp = tile(K, 256), tile(V, 256)
    if Kp != K:
        q, k = F.pad(q, (0, Kp - K)), F.pad(k, (0, Kp - K))
    if Vp != V:
        v = F.pad(v, (0, Vp - V))
    if initial_state is not None and (Kp, Vp) != (K, V):
        initial_state = F.pad(initial_state, (0, Vp - V, 0, Kp - K))
    tables = chunk_tables(B, T, bounds, q.device)
    # Long sequences over few heads: the serial passes on segments side by side (segments.py, RELIN_GDN_CP).
    plan = segment_plan(B, T, bounds, H, q.device)
    packed = [x.reshape(1, B * T, *x.shape[2:]) for x in (q, k, v, g, beta)]
    inputs = (q, k, v, g, beta, initial_state)
    if torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in inputs):
        o, final = ChunkGatedDeltaRuleFunction.apply(*packed, scale, initial_state, output_final_state, tables, plan)
    else:
        h0 = None if initial_state is None else initial_state.contiguous()
        o, final, _ = chunk_gdn_fwd(*(x.contiguous() for x in packed), scale, h0, tables, output_final_state, plan)
    o = o.reshape(B, T, H, Vp)[..., :V]
    return o, (final[:, :, :K, :V] if final is not None and (Kp, Vp) != (K, V) else final)
