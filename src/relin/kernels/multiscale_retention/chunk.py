"""``multiscale_diag_retention``: the LIA-MTR bridge recurrence (eqs. 3-5) as one autograd op: Triton kernels on
CUDA tensors (``triton_fwd``, ``triton_bwd``), the blocked PyTorch form on CPU tensors (``torch_chunk``)."""
from __future__ import annotations

import torch

from ..common.backend import use_triton
from .ref import check_inputs
from .torch_chunk import chunked_multiscale_diag_retention
from .triton_bwd import retention_bwd
from .triton_fwd import MAX_SCALES, retention_fwd


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


def multiscale_diag_retention(q, k, v, gate, mix, log_decays, initial_state=None, output_final_state=False,
                              block_len=None, backend=None):
    """Fused multi-timescale diagonal retention, LIA-MTR eqs. 3-5 (without the output projection).

    Per channel c and scale s: M_{t,s} = exp(log_decays[s]) M_{t-1,s} + gate_t ⊙ k_t ⊙ v_t,
    o_t = q_t ⊙ Σ_s mix_{t,s} M_{t,s}; the [B, T, S, C] memories are never stored.

    q, k, v: [B, T, C]; gate: [B, T, C] or [B, T, 1]; mix: [B, T, S]; log_decays: [S] (fixed: no
    gradient); initial_state: [B, S, C] (fp32). Returns o [B, T, C] in q's dtype and the final state
    [B, S, C] fp32 when ``output_final_state`` (else None). Gradients flow to q, k, v, gate, mix and
    initial_state. ``block_len``: tokens per T-block of the Triton two-level scan (power of two,
    default from the shape; block_len >= T runs one sequential pass). ``backend``: "auto" (Triton on CUDA
    tensors, PyTorch on CPU), "triton" or "torch"; default the environment variable RELIN_KERNEL_BACKEND, else
    "auto".
    """
    check_inputs(q, k, v, gate, mix, log_decays, initial_state)
    if block_len is not None and (block_len < 1 or block_len & (block_len - 1)):
        raise ValueError(f"block_len={block_len}: expected a power of two")
    if not use_triton(q, backend):
        return chunked_multiscale_diag_retention(q, k, v, gate, mix, log_decays, initial_state, output_final_state)
    if mix.shape[-1] > MAX_SCALES:
        raise ValueError(f"mix has S = {mix.shape[-1]} scales: the Triton kernels support 1 to {MAX_SCALES}")
    q, k, v, gate, mix = (x.contiguous() for x in (q, k, v, gate, mix))
    log_decays = log_decays.detach().float().contiguous()
    if initial_state is not None:
        initial_state = initial_state.contiguous()
    return MultiscaleDiagRetentionFunction.apply(q, k, v, gate, mix, log_decays, initial_state,
                                                 output_final_state, block_len)
