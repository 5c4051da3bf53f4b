"""Token-by-token gated delta rule for decoding (few new tokens per call): forward only, like fla.

Per head: S_t = exp(g_t) S_{t-1},  S_t += k_t (beta_t (v_t - S_t^T k_t))^T,  o_t = scale S_t^T q_t
(the same recurrence as ``ref.py``, written as a delta update). One program per (V-block, sequence x head),
the [K, BV] state in registers.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import use_triton
from ..common.chunk_tables import chunk_tables
from ..common.triton_utils import load_state, state_tile
from .ref import L2NORM_EPS, check_inputs, check_triton_head_dims, naive_recurrent_gated_delta_rule


@triton.jit(do_not_specialize=["T", "s_q", "s_k", "s_v"])
def gdn_fwd_kernel_fused_recurrent(
    q, k, v, g, beta, o, h0, ht, cu_seqlens, scale, T, s_q, s_k, s_v,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    USE_INITIAL_STATE: tl.constexpr, STORE_FINAL_STATE: tl.constexpr, USE_QK_L2NORM: tl.constexpr,
    EPS: tl.constexpr,
):
    i_v, i_nh = tl.program_id(0), tl.program_id(1)
    i_nh = tl.cast(i_nh, tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    bos, eos = tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    o_k, o_v, m_k, m_v, m_kv, o_kv = state_tile(0, i_v, K, V, BK, BV)
    b_S = load_state(h0, i_nh, o_kv, m_kv, K, V, BK, BV, USE_INITIAL_STATE)
    for i_t in range(0, eos - bos):
        r = bos + tl.cast(i_t, tl.int64)
        b_q = tl.load(q + r * s_q + i_h * K + o_k, mask=m_k, other=0.).to(tl.float32)
        b_k = tl.load(k + r * s_k + i_h * K + o_k, mask=m_k, other=0.).to(tl.float32)
        b_v = tl.load(v + r * s_v + i_h * V + o_v, mask=m_v, other=0.).to(tl.float32)
        b_g = tl.load(g + r * H + i_h).to(tl.float32)
        b_beta = tl.load(beta + r * H + i_h).to(tl.float32)
        if USE_QK_L2NORM:
            b_q = b_q / tl.sqrt(tl.sum(b_q * b_q, 0) + EPS)
            b_k = b_k / tl.sqrt(tl.sum(b_k * b_k, 0) + EPS)
        b_S = b_S * tl.exp(b_g)
        b_d = b_beta * (b_v - tl.sum(b_S * b_k[:, None], 0))
        b_S += b_k[:, None] * b_d[None, :]
        b_o = scale * tl.sum(b_S * b_q[:, None], 0)
        tl.store(o + (r * H + i_h) * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
    if STORE_FINAL_STATE:
        tl.store(ht + i_nh * K * V + o_kv, b_S, mask=m_kv)


def token_stride(x: torch.Tensor) -> int | None:
    """The stride between consecutive tokens of ``x [B, T, H, D]`` when its heads and features are packed and its
    (B, T) dims flatten to one stride; None otherwise."""
    B, T, H, D = x.shape
    if x.stride(3) != 1 or (H > 1 and x.stride(2) != D):
        return None
    if T == 1:
        return x.stride(0)
    if B > 1 and x.stride(0) != T * x.stride(1):
        return None
    return x.stride(1)


def fused_recurrent_gated_delta_rule(
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
    final_state_in_place: bool = False,
    backend: str | None = None,
):
    """Gated delta rule one token at a time (decoding); arguments and returns as ``chunk_gated_delta_rule``.

    ``final_state_in_place``: the final state overwrites ``initial_state`` (fp32) and is returned as that tensor,
    so a static cache's state keeps its address and is not copied (each program reads its tile of the state
    before writing the same tile). The Triton path has no backward (as in fla); the PyTorch path (CPU) is the
    differentiable reference loop.
    """
    if final_state_in_place and (initial_state is None or initial_state.dtype != torch.float32
                                 or not output_final_state):
        raise ValueError("final_state_in_place needs an fp32 initial_state and output_final_state=True")
    N, bounds = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    B, T, H, K = q.shape
    V = v.shape[-1]
    scale = K ** -0.5 if scale is None else scale
    if not use_triton(q, backend):
        o, ht = naive_recurrent_gated_delta_rule(
            q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel, cu_seqlens)
        if final_state_in_place:
            initial_state.copy_(ht)
            ht = initial_state
        return o, ht
    check_triton_head_dims(K, V)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, g, beta, initial_state) if x is not None):
        raise NotImplementedError(
            "fused_recurrent_gated_delta_rule has no Triton backward; use chunk_gated_delta_rule for training")
    cu_seqlens = chunk_tables(B, T, bounds, q.device).cu_seqlens
    # q, k and v may be heads sliced out of one fused projection: any token stride, heads and features packed.
    q, k, v = (x if token_stride(x) is not None else x.contiguous() for x in (q, k, v))
    g, beta = g.contiguous(), beta.contiguous()
    h0 = None if initial_state is None else initial_state.contiguous()
    if final_state_in_place and h0 is not initial_state:
        raise ValueError("final_state_in_place needs a contiguous initial_state")
    BK, BV = triton.next_power_of_2(K), min(triton.next_power_of_2(V), 32)
    o = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    ht = (h0 if final_state_in_place else
          torch.empty(N, H, K, V, dtype=torch.float32, device=q.device) if output_final_state else None)
    gdn_fwd_kernel_fused_recurrent[(triton.cdiv(V, BV), N * H)](
        q, k, v, g, beta, o, h0, ht, cu_seqlens, scale, T, token_stride(q), token_stride(k), token_stride(v),
        H=H, K=K, V=V, BK=BK, BV=BV, USE_INITIAL_STATE=h0 is not None, STORE_FINAL_STATE=output_final_state,
        USE_QK_L2NORM=use_qk_l2norm_in_kernel, EPS=L2NORM_EPS, num_warps=1 if BK * BV <= 2048 else 4)
    return o, ht
