"""``multiscale_diag_retention``: the LIA-MTR bridge recurrence (eqs. 3-5) as one autograd op."""
from __future__ import annotations

import torch

from ..common.backend import use_triton
from .chunk import retention_bwd, retention_fwd
from .torch_path import chunked_multiscale_diag_retention


class MultiscaleDiagRetentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, gate, mix, log_decays, initial_state, output_final_state, block_len):
        o, final_state, start = retention_fwd(q, k, v, gate, mix, log_decays, initial_state, block_len)
        ctx.save_for_backward(q, k, v, gate, mix, log_decays, start)
        ctx.block_len = block_len
        ctx.has_initial_state = initial_state is not None
        return o, (final_state if output_final_state else None)

    @staticmethod
    def backward(ctx, do, dht):
        q, k, v, gate, mix, log_decays, start = ctx.saved_tensors
        dq, dk, dv, dgate, dmix, dh0 = retention_bwd(
            q, k, v, gate, mix, log_decays, start, do.contiguous(), dht, ctx.block_len)
        return dq, dk, dv, dgate, dmix, None, dh0 if ctx.has_initial_state else None, None, None


def _check(q, k, v, gate, mix, log_decays, initial_state):
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


def multiscale_diag_retention(q, k, v, gate, mix, log_decays, initial_state=None, output_final_state=False,
                              block_len=None):
    """Fused multi-timescale diagonal retention, LIA-MTR eqs. 3-5 (without the output projection).

    Per channel c and scale s: M_{t,s} = exp(log_decays[s]) M_{t-1,s} + gate_t ⊙ k_t ⊙ v_t,
    o_t = q_t ⊙ Σ_s mix_{t,s} M_{t,s}; the [B, T, S, C] memories are never stored.

    q, k, v: [B, T, C]; gate: [B, T, C] or [B, T, 1]; mix: [B, T, S]; log_decays: [S] (fixed: no
    gradient); initial_state: [B, S, C] (fp32). Returns o [B, T, C] in q's dtype and the final state
    [B, S, C] fp32 when ``output_final_state`` (else None). Gradients flow to q, k, v, gate, mix and
    initial_state. ``block_len``: tokens per T-block of the Triton two-level scan (power of two,
    default from the shape; block_len >= T runs one sequential pass).
    """
    _check(q, k, v, gate, mix, log_decays, initial_state)
    if block_len is not None and (block_len < 1 or block_len & (block_len - 1)):
        raise ValueError(f"block_len={block_len}: expected a power of two")
    if not use_triton(q):
        return chunked_multiscale_diag_retention(q, k, v, gate, mix, log_decays, initial_state, output_final_state)
    q, k, v, gate, mix = (x.contiguous() for x in (q, k, v, gate, mix))
    log_decays = log_decays.detach().float().contiguous()
    if initial_state is not None:
        initial_state = initial_state.contiguous()
    return MultiscaleDiagRetentionFunction.apply(q, k, v, gate, mix, log_decays, initial_state,
                                                 output_final_state, block_len)
