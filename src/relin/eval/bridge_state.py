"""What a bridge carries after N tokens (seed 000, Theorem 2: "the memory state magnitude ||M_{t,s}|| remains
strictly bounded and converges geometrically as N → ∞" for ||u_t|| ≤ U and 0 < λ_s < 1).

:func:`state_norms` measures, for one bridge on a batch of token features, the norm of the state it holds after
the last token: the LIA-MTR family per scale (``||M_{N,s}||``, the C-vector of eq. 3 or the per-head K x V
matrices of the ``head_matrix`` reading) with Theorem 2's bound ``max_t ||u_t|| / (1 - λ_s)``; ungated linear
attention its undecayed K x V sum (which grows with N); softmax attention its key-value cache (which grows with
N by construction); the MLP none.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..layers.bridges import Bridge, scan_permutation


@torch.no_grad()
def state_norms(bridge: Bridge, features: torch.Tensor) -> dict | None:
    """``features [B, N, d_in]`` -> ``{"norm": mean over the batch of the state's norm, "kind", ...}``; for the
    LIA-MTR family also ``per_scale`` (mean ||M_{N,s}|| per scale) and ``bound_ratio`` (the largest over scales
    and the batch of ||M_{N,s}|| (1 - λ_s) / max_t ||u_t||, at most 1 by Theorem 2). None for a bridge without a
    state (the MLP)."""
    from ..layers.mtr_bridge import MTRBridge

    mixer = bridge.mixer
    order = scan_permutation(features.shape[1], bridge.scan_order).to(features.device)
    x = features[:, order]
    if isinstance(mixer, MTRBridge):
        norms, injection = mixer.final_states(x)                           # [B, S], [B]
        lam = mixer.log_decays.double().exp().to(norms.device)
        ratio = (norms.double() * (1 - lam)[None] / injection.double().clamp_min(1e-30)[:, None]).max()
        return {"kind": f"MTR {mixer.state} state", "norm": float(norms.max(1).values.mean()),
                "per_scale": [float(v) for v in norms.mean(0)], "bound_ratio": float(ratio),
                "injection": float(injection.mean())}
    if hasattr(mixer, "impl"):                                              # softmax attention: its KV cache
        k, v = mixer.k_proj(x), mixer.v_proj(x)
        return {"kind": "key-value cache", "norm": float(torch.cat([k, v], -1).flatten(1).norm(dim=1).mean())}
    if hasattr(mixer, "num_heads") and hasattr(mixer, "backend"):           # ungated linear attention
        from relin.kernels.decayed_linear_attn import chunk_decayed_linear_attn

        B, N, C = x.shape
        heads = (B, N, mixer.num_heads, C // mixer.num_heads)
        q, k = (F.elu(p(x)) + 1 for p in (mixer.q_proj, mixer.k_proj))
        _, (state, _) = chunk_decayed_linear_attn(q.view(heads), k.view(heads), mixer.v_proj(x).view(heads),
                                                  normalize=True, output_final_state=True, backend=mixer.backend)
        return {"kind": "linear-attention K x V sum", "norm": float(state.flatten(1).norm(dim=1).mean())}
    return None
