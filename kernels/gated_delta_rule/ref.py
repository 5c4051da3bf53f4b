"""fp32 token-by-token reference of the gated delta rule (Yang, Kautz, Hatamizadeh 2025, "Gated Delta Networks", arXiv 2412.06464).

Per head, with state S_t of shape [K, V]:
    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,    o_t = scale * S_t^T q_t.
"""
from __future__ import annotations

import torch

from .utils import check_inputs, l2norm


def naive_recurrent_gated_delta_rule(
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
    """Readable per-token loop; differentiable by autograd.

    Args:
        q, k: [B, T, H, K]. v: [B, T, H, V]. g (log decay), beta: [B, T, H].
        initial_state: [N, H, K, V] (N = B, or the number of sequences with ``cu_seqlens``).
        cu_seqlens: [N+1] boundaries of sequences packed along T (B must be 1).
    Returns:
        o [B, T, H, V] in v's dtype, and the final state [N, H, K, V] in fp32 (or None).
    """
    N = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    B, T, H, K = q.shape
    V = v.shape[-1]
    out_dtype = v.dtype
    scale = K ** -0.5 if scale is None else scale
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    if cu_seqlens is None:
        spans = [(n, 0, T) for n in range(B)]
    else:
        bounds = cu_seqlens.tolist()
        spans = [(0, bounds[n], bounds[n + 1]) for n in range(N)]
    rows, finals = [[] for _ in range(B)], []
    for n, (b, start, end) in enumerate(spans):
        S = q.new_zeros(H, K, V) if initial_state is None else initial_state[n].float()
        for t in range(start, end):
            S = S * g[b, t].exp()[:, None, None]
            v_new = beta[b, t][:, None] * (v[b, t] - torch.einsum("hk,hkv->hv", k[b, t], S))
            S = S + k[b, t][:, :, None] * v_new[:, None, :]
            rows[b].append(scale * torch.einsum("hk,hkv->hv", q[b, t], S))
        finals.append(S)
    o = torch.stack([torch.stack(r) if r else v.new_zeros(0, H, V) for r in rows])
    return o.to(out_dtype), (torch.stack(finals) if output_final_state else None)
