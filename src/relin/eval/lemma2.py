"""Seed 000's Lemma 2 ("LIA-MTR mathematically generalizes standard first-order linear attention"), checked
numerically under each reading of the state (notes/methods.md §7C.1).

Against the linear attention the project's baseline implements (Katharopoulos et al., whom the seed cites for its
ELU + 1: φ on queries and keys, normalised by φ(q_t)·Σ φ(k_j)), one rule for both readings
(:func:`constant_input_growth`): on a constant input that attention's output is the same at every position, whatever
its weights (a weighted mean of equal values), while LIA-MTR reduced to S = 1, λ = 1, no gate writes the same k ⊙ v
(or k vᵀ) t times and reads it unnormalised, so its output is t times a constant; no weights make the two equal.

First-order linear attention (unnormalised, φ on the keys as eq. 1): ``o_t = Σ_{j≤t} (q_t · k_j) v_j``, i.e. the
query read through ``S_t = Σ_{j≤t} k_j v_jᵀ``, a d_k x d_v matrix. LIA-MTR reduces to it with one scale, λ = 1,
no gate (g ≡ 1, α ≡ 1):

- ``head_matrix`` reading (one head, a K x V state): the bridge is linear attention; the output equals it to
  rounding (:func:`head_matrix_error`). Lemma 2 holds.
- ``diagonal`` reading (eq. 3 as written, M a C-vector): the bridge applies to its query the map
  ``W_o diag(m_t) W_q``, and over every history these maps span at most C dimensions, while linear attention's
  maps ``W_o S_tᵀ W_q`` span d_k · d_v (:func:`map_dimensions`, the numerical rank of the stacked states). At
  the same width (C = d) no choice of weights makes the two equal: Lemma 2 fails as written.
- the diagonal reading with C = d_k · d_v channels, q and k repeated over the value index and v over the key
  index (``q̃_(a,b) = q_a``, ``k̃_(a,b) = k_a``, ``ṽ_(a,b) = v_b``, ``W̃_o`` summing over a) equals linear
  attention to rounding (:func:`expanded_diagonal_error`): the diagonal state generalises linear attention only
  with d_k · d_v channels, which is the head_matrix state flattened.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..config.lia_mtr import MTRConfig
from ..layers.mtr_bridge import MTRBridge


def _weights(d: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {name: torch.randn(d, d, generator=gen, dtype=torch.float64) / d ** 0.5 for name in ("q", "k", "v", "o")}


def linear_attention(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    """``o_t = W_o Σ_{j≤t} (q_t · k_j) v_j``, q = W_q x, k = ELU(W_k x) + 1, v = W_v x, in float64 (a step loop)."""
    x = x.double()
    q, k, v = x @ w["q"].T, F.elu(x @ w["k"].T) + 1, x @ w["v"].T
    state = torch.zeros(x.shape[0], q.shape[-1], v.shape[-1], dtype=torch.float64)
    out = []
    for t in range(x.shape[1]):
        state = state + k[:, t, :, None] * v[:, t, None, :]
        out.append(torch.einsum("bk,bkv->bv", q[:, t], state))
    return torch.stack(out, 1) @ w["o"].T


def _reduced(width: int, state: str, d: int) -> MTRBridge:
    """LIA-MTR with one scale at λ = 1 and no gate (α ≡ 1, g ≡ 1)."""
    return MTRBridge(d, d, MTRConfig(width=width, num_scales=1, decay_max=1.0, gate="none", state=state, num_heads=1),
                     backend="torch")


def _relative_error(ours: torch.Tensor, ref: torch.Tensor) -> float:
    return float((ours.double() - ref).norm() / ref.norm())


def head_matrix_error(d: int = 8, n: int = 64, seed: int = 0) -> float:
    """Relative error of the head_matrix reading (one head; the kernel's 1/√K scale folded into W_q) against
    linear attention with the same weights."""
    w = _weights(d, seed)
    bridge = _reduced(d, "head_matrix", d)
    with torch.no_grad():
        for name, proj in (("q", bridge.q_proj), ("k", bridge.k_proj), ("v", bridge.v_proj), ("o", bridge.o_proj)):
            proj.weight.copy_(w[name] * (d ** 0.5 if name == "q" else 1.0))
        x = torch.randn(2, n, d, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        return _relative_error(bridge(x.float()), linear_attention(x, w))


def expanded_diagonal_error(d: int = 8, n: int = 64, seed: int = 0) -> float:
    """Relative error of the diagonal reading with d² channels (q, k repeated over the value index, v over the key
    index, W_o summing over the key index) against linear attention."""
    w = _weights(d, seed)
    bridge = _reduced(d * d, "diagonal", d)
    a, b = torch.arange(d).repeat_interleave(d), torch.arange(d).repeat(d)    # channel (a, b) -> key a, value b
    with torch.no_grad():
        bridge.q_proj.weight.copy_(w["q"][a])
        bridge.k_proj.weight.copy_(w["k"][a])
        bridge.v_proj.weight.copy_(w["v"][b])
        bridge.o_proj.weight.copy_(w["o"][:, b])
        x = torch.randn(2, n, d, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64)
        return _relative_error(bridge(x.float()), linear_attention(x, w))


def map_dimensions(d: int = 8, n: int = 256, seed: int = 0, tol: float = 1e-9) -> dict[str, int]:
    """Dimensions of the families of maps each model applies to its query over ``n`` histories: linear
    attention's states S_t (numerical rank of the stacked vec(S_t)) against the diagonal reading's m_t at width
    d (rank of the stacked m_t, at most C = d)."""
    w = _weights(d, seed)
    x = torch.randn(1, n, d, generator=torch.Generator().manual_seed(seed + 2), dtype=torch.float64)
    k, v = F.elu(x[0] @ w["k"].T) + 1, x[0] @ w["v"].T
    states = torch.cumsum(k[:, :, None] * v[:, None, :], 0).reshape(n, -1)          # vec(S_t), [n, d²]
    diagonal = torch.cumsum(k * v, 0)                                               # m_t, [n, d]

    def rank(m: torch.Tensor) -> int:
        s = torch.linalg.svdvals(m)
        return int((s > tol * s[0]).sum())

    return {"linear_attention": rank(states), "diagonal": rank(diagonal), "width": d, "keys_x_values": d * d}


def growth_exponent(outputs: torch.Tensor) -> float:
    """p of ``‖y_t‖ ∝ t^p`` between the first and last position of ``outputs [1, T, d]``."""
    first, last = outputs[0, 0].norm().item(), outputs[0, -1].norm().item()
    return math.log(max(last, 1e-300) / max(first, 1e-300)) / math.log(outputs.shape[1])


def constant_input_growth(d: int = 8, n: int = 64, seed: int = 0) -> dict[str, float]:
    """On one input vector repeated ``n`` times, the exponent p of each model's output norm ∝ t^p: the project's
    linear-attention baseline (normalised, φ on q and k; p = 0 for any weights) and LIA-MTR reduced to S = 1,
    λ = 1, no gate under each reading of the state (p = 1 for any weights), all with random weights."""
    from ..layers.bridges import LinearAttentionBridge

    torch.manual_seed(seed)
    x = torch.randn(1, 1, d, generator=torch.Generator().manual_seed(seed + 3)).expand(1, n, d).contiguous()
    models = {"linear_attention": LinearAttentionBridge(d, d, num_heads=1, backend="torch"),
              "diagonal": _reduced(d, "diagonal", d), "head_matrix": _reduced(d, "head_matrix", d)}
    with torch.no_grad():
        return {name: growth_exponent(model(x).double()) for name, model in models.items()}


def lemma2_checks(d: int = 8, seed: int = 0) -> dict:
    """Every number the report's Lemma 2 rows read."""
    return {"head_matrix_error": head_matrix_error(d, seed=seed),
            "expanded_diagonal_error": expanded_diagonal_error(d, seed=seed),
            "map_dimensions": map_dimensions(d, seed=seed),
            "constant_input_growth": constant_input_growth(d, seed=seed)}
