"""fp32 token-by-token reference of the gated delta rule (Yang, Kautz, Hatamizadeh 2025, "Gated Delta Networks",
arXiv 2412.06464), and the argument contract every path checks.

Per head, with state S_t of shape [K, V]:
    S_t = exp(g_t) (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T,    o_t = scale * S_t^T q_t.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.chunk_tables import sequence_bounds

L2NORM_EPS = 1e-6
# Widest head dims the Triton kernels serve: the [BT, K] and [K, BV] tiles of one program stay on chip.
MAX_HEAD_DIM = 256


def l2norm(x: torch.Tensor) -> torch.Tensor:
    """``x / sqrt(sum(x^2) + 1e-6)`` along the last dim, in fp32 (fla's ``l2norm``)."""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + L2NORM_EPS)


def check_inputs(q, k, v, g, beta, initial_state, cu_seqlens) -> tuple[int, list[int] | None]:
    """Validate a gated delta rule call (one ValueError line naming the argument); return the number of
    sequences N and the sequence offsets as a list (None without ``cu_seqlens``)."""
    if q.dim() != 4 or k.shape != q.shape:
        raise ValueError(f"q and k must both be [B, T, H, K]; got {tuple(q.shape)} and {tuple(k.shape)}")
    B, T, H, K = q.shape
    if T == 0:
        raise ValueError("q has T = 0 tokens; expected at least one")
    if v.dim() != 4 or v.shape[:3] != (B, T, H):
        raise ValueError(f"v must be [B, T, H, V] = [{B}, {T}, {H}, V]; got {tuple(v.shape)}")
    for name, x in (("g", g), ("beta", beta)):
        if x.shape != (B, T, H):
            raise ValueError(f"{name} must be [B, T, H] = [{B}, {T}, {H}]; got {tuple(x.shape)}")
    bounds = sequence_bounds(cu_seqlens, T, B)
    N = B if bounds is None else len(bounds) - 1
    if initial_state is not None and initial_state.shape != (N, H, K, v.shape[-1]):
        raise ValueError(
            f"initial_state must be [N, H, K, V] = [{N}, {H}, {K}, {v.shape[-1]}]; got {tuple(initial_state.shape)}")
    return N, bounds


def check_triton_head_dims(K: int, V: int) -> None:
    for name, dim in (("K (q, k head dim)", K), ("V (v head dim)", V)):
        if not 1 <= dim <= MAX_HEAD_DIM:
            raise ValueError(f"{name} = {dim}: the Triton kernels support 1 to {MAX_HEAD_DIM}")


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
    N, bounds = check_inputs(q, k, v, g, beta, initial_state, cu_seqlens)
    B, T, H, K = q.shape
    V = v.shape[-1]
    out_dtype = v.dtype
    scale = K ** -0.5 if scale is None else scale
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    q, k, v, g, beta = (x.float() for x in (q, k, v, g, beta))
    spans = [(n, 0, T) for n in range(B)] if bounds is None else [(0, bounds[n], bounds[n + 1]) for n in range(N)]
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


def naive_gdn_gates(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor,
                    beta_scale: float = 1.0, real: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Gated DeltaNet's per-head gates from its projections (Yang et al. 2025; Qwen3-Next), in fp32:

        g = −exp(A_log) · softplus(a + dt_bias),   β = beta_scale · σ(b)

    ``a, b [..., H]``, ``A_log, dt_bias [H]``, ``real [...]`` (0 = padding: g = β = 0). Returns ``g, beta [..., H]``
    in fp32."""
    g = -A_log.float().exp() * F.softplus(a.float() + dt_bias.float())
    beta = torch.sigmoid(b.float()) * beta_scale
    if real is not None:
        g, beta = g * real[..., None].float(), beta * real[..., None].float()
    return g, beta
