"""Readable fp32 reference for multi-timescale diagonal retention (LIA-MTR, eqs. 3-5).

Per channel and scale s: M_{t,s} = λ_s M_{t-1,s} + u_t with u_t = gate_t ⊙ k_t ⊙ v_t (eq. 3),
o_t = q_t ⊙ Σ_s mix_{t,s} M_{t,s} (eqs. 4-5 before the output projection).
"""
from __future__ import annotations

import torch


def check_inputs(q, k, v, gate, mix, log_decays, initial_state):
    """Raise one ValueError line naming the first malformed argument."""
    if q.dim() != 3:
        raise ValueError(f"q must be [B, T, C], got shape {tuple(q.shape)}")
    B, T, C = q.shape
    if T == 0:
        raise ValueError("q has T = 0 tokens; expected at least one")
    for name, x in (("k", k), ("v", v)):
        if x.shape != q.shape:
            raise ValueError(f"{name} has shape {tuple(x.shape)}, expected q's shape [B, T, C] = {(B, T, C)}")
    if gate.shape not in ((B, T, C), (B, T, 1)):
        raise ValueError(f"gate has shape {tuple(gate.shape)}, expected [B, T, C] = {(B, T, C)} or [B, T, 1]")
    if mix.dim() != 3 or mix.shape[:2] != (B, T):
        raise ValueError(f"mix has shape {tuple(mix.shape)}, expected [B, T, S] with B, T = {(B, T)}")
    S = mix.shape[-1]
    if log_decays.shape != (S,):
        raise ValueError(f"log_decays has shape {tuple(log_decays.shape)}, expected [S] = ({S},)")
    if initial_state is not None and initial_state.shape != (B, S, C):
        raise ValueError(f"initial_state has shape {tuple(initial_state.shape)}, expected [B, S, C] = {(B, S, C)}")


def naive_multiscale_diag_retention(q, k, v, gate, mix, log_decays, initial_state=None,
                                    output_final_state=False):
    """One step per token in fp32; differentiable through autograd.

    q, k, v: [B, T, C]; gate: [B, T, C] or [B, T, 1]; mix: [B, T, S]; log_decays: [S] (log λ_s);
    initial_state: [B, S, C]. Returns o [B, T, C] in q's dtype and the final state [B, S, C] fp32.
    """
    dtype = q.dtype
    q, k, v, gate, mix = (x.float() for x in (q, k, v, gate, mix))
    B, T, C = q.shape
    decay = log_decays.float().exp()[:, None]
    state = q.new_zeros(B, mix.shape[-1], C) if initial_state is None else initial_state.float()
    outputs = []
    for t in range(T):
        state = decay * state + (gate[:, t] * k[:, t] * v[:, t])[:, None, :]
        outputs.append(q[:, t] * torch.einsum("bs,bsc->bc", mix[:, t], state))
    o = torch.stack(outputs, 1).to(dtype)
    return o, (state if output_final_state else None)
