"""One decoding step of a depthwise causal short convolution, its state shifted in place: one program per
(row, block of channels) reads the step's inputs (any row stride, e.g. a slice of a fused projection), the
state and the taps once, and writes the output and the shifted state. Forward only."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import use_triton
from .ref import check_inputs, naive_short_conv_step

BLOCK_C = 256


@triton.jit(do_not_specialize=["C", "sx_b"])
def short_conv_step_kernel(
    x, state, w, real, y, C, sx_b,
    W: tl.constexpr, BW: tl.constexpr, BC: tl.constexpr, SILU: tl.constexpr, HAS_REAL: tl.constexpr,
):
    i_b, i_c = tl.cast(tl.program_id(0), tl.int64), tl.program_id(1)
    o_c = i_c * BC + tl.arange(0, BC)
    o_w = tl.arange(0, BW)
    m_c = o_c < C
    b_x = tl.load(x + i_b * sx_b + o_c, mask=m_c, other=0.).to(tl.float32)
    if HAS_REAL:
        b_x *= tl.load(real + i_b).to(tl.float32)
    p_s = state + (i_b * C + o_c[:, None]) * (W - 1) + o_w[None, :]
    m_s = m_c[:, None] & (o_w[None, :] < W - 1)
    b_s = tl.load(p_s, mask=m_s, other=0.).to(tl.float32)                               # [BC, BW], oldest first
    b_w = tl.load(w + o_c[:, None] * W + o_w[None, :], mask=m_s, other=0.).to(tl.float32)
    b_last = tl.load(w + o_c * W + W - 1, mask=m_c, other=0.).to(tl.float32)
    b_y = tl.sum(b_s * b_w, 1) + b_last * b_x
    if SILU:
        b_y = b_y * tl.sigmoid(b_y)
    tl.store(y + i_b * C + o_c, b_y.to(y.dtype.element_ty), mask=m_c)
    # The shifted state reads slots other threads hold: every read above must land before any write below.
    b_next = tl.load(p_s + 1, mask=m_c[:, None] & (o_w[None, :] < W - 2), other=0.).to(tl.float32)
    b_next = tl.where(o_w[None, :] == W - 2, b_x[:, None], b_next)
    tl.debug_barrier()
    tl.store(p_s, b_next.to(state.dtype.element_ty), mask=m_s)


def short_conv_step(x: torch.Tensor, state: torch.Tensor, weight: torch.Tensor, activation: str = "silu",
                    real: torch.Tensor | None = None, backend: str | None = None) -> torch.Tensor:
    """One step of a depthwise causal convolution (see ``ref.py``).

    Args:
        x: ``[B, C]``, this step's inputs; its channels contiguous, any row stride.
        state: ``[B, C, W-1]`` contiguous, the previous inputs oldest first; shifted in place.
        weight: ``[C, W]``, the taps (the last one multiplies x).
        activation: ``silu`` or ``none``.
        real: ``[B]``, 0 where the step is padding (its input then counts as zero); None for all real.
        backend: ``auto`` | ``triton`` | ``torch`` (see ``relin.kernels.common.backend``).

    Returns ``y [B, C]`` in x's dtype. Forward only.
    """
    check_inputs(x, state, weight, activation, real)
    if not use_triton(x, backend):
        return naive_short_conv_step(x, state, weight, activation, real)
    if not state.is_contiguous():
        raise ValueError("state must be contiguous: it is shifted where it lies")
    if x.stride(-1) != 1:
        x = x.contiguous()
    B, C = x.shape
    W = weight.shape[1]
    y = torch.empty(B, C, dtype=x.dtype, device=x.device)
    if B * C:
        short_conv_step_kernel[(B, triton.cdiv(C, BLOCK_C))](
            x, state, weight.contiguous(), real if real is not None else x, y, C, x.stride(0),
            W=W, BW=triton.next_power_of_2(W - 1), BC=BLOCK_C, SILU=activation == "silu", HAS_REAL=real is not None,
            num_warps=4)
    return y
