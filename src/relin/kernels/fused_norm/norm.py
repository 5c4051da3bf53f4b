"""RMSNorm in one pass per row (optionally fused with the residual add before it, or with Gated DeltaNet's
output gate): one program per row reads it once, reduces in fp32 and writes the result. Forward only: training
runs the modules' PyTorch path, which autograd differentiates."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import use_triton
from .ref import check_inputs, naive_rms_norm

# Widest row one program holds in registers.
MAX_WIDTH = 65536


@triton.jit(do_not_specialize=["H", "sx_m", "sx_h", "sr_m", "sr_h", "sg_m", "sg_h"])
def rms_norm_fwd_kernel(
    x, w, res, gate, y, res_out, eps, H, sx_m, sx_h, sr_m, sr_h, sg_m, sg_h,
    D: tl.constexpr, BD: tl.constexpr, HAS_RESIDUAL: tl.constexpr, HAS_GATE: tl.constexpr,
):
    i = tl.cast(tl.program_id(0), tl.int64)
    i_m, i_h = i // H, i % H
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_x = tl.load(x + i_m * sx_m + i_h * sx_h + o_d, mask=m_d, other=0.).to(tl.float32)
    if HAS_RESIDUAL:
        b_x += tl.load(res + i_m * sr_m + i_h * sr_h + o_d, mask=m_d, other=0.).to(tl.float32)
        b_x = b_x.to(res_out.dtype.element_ty)                      # the add rounds, as PyTorch's does
        tl.store(res_out + i * D + o_d, b_x, mask=m_d)
        b_x = b_x.to(tl.float32)
    b_r = tl.rsqrt(tl.sum(b_x * b_x, 0) / D + eps)
    if HAS_RESIDUAL:
        b_n = (b_x * b_r).to(res_out.dtype.element_ty).to(tl.float32)
    else:
        b_n = (b_x * b_r).to(x.dtype.element_ty).to(tl.float32)
    b_y = b_n * tl.load(w + o_d, mask=m_d, other=0.).to(tl.float32)
    if HAS_GATE:
        b_g = tl.load(gate + i_m * sg_m + i_h * sg_h + o_d, mask=m_d, other=0.).to(tl.float32)
        b_y = b_y.to(y.dtype.element_ty).to(tl.float32) * (b_g * tl.sigmoid(b_g))
    tl.store(y + i * D + o_d, b_y.to(y.dtype.element_ty), mask=m_d)


def row_strides(t: torch.Tensor) -> tuple[int, int] | None:
    """Strides ``(s_m, s_h)`` that address ``t [..., H, D]`` as rows ``(m, h)`` (m flattening the leading dims)
    with a unit feature stride, or None when the leading dims do not flatten to one stride."""
    if t.stride(-1) != 1:
        return None
    if t.dim() == 1:
        return 0, 0
    lead = [(n, s) for n, s in zip(t.shape[:-2], t.stride()[:-2]) if n > 1]
    if any(s_outer != n_inner * s_inner for (_, s_outer), (n_inner, s_inner) in zip(lead, lead[1:])):
        return None
    return (lead[-1][1] if lead else 0), t.stride(-2)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, residual: torch.Tensor | None = None,
             gate: torch.Tensor | None = None, backend: str | None = None
             ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """RMSNorm over the last dimension (see ``ref.py`` for the exact roundings).

    Args:
        x: ``[..., D]``; any strides whose feature dim is contiguous (e.g. heads sliced out of a fused projection).
        weight: ``[D]``.
        eps: added to the mean square.
        residual: like x; normalise ``residual + x`` and return that sum too (the pre-norm block's add).
        gate: like x; multiply by ``SiLU(gate)`` (Gated DeltaNet's output norm).
        backend: ``auto`` | ``triton`` | ``torch`` (see ``relin.kernels.common.backend``).

    Returns ``y`` contiguous, shaped like x (and the sum, with ``residual``). The kernel is forward only: where a
    gradient is needed, the fp32 reference (the same math) runs instead, and autograd differentiates it.
    """
    check_inputs(x, weight, residual, gate)
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, weight, residual, gate))
    if needs_grad or not use_triton(x, backend):
        return naive_rms_norm(x, weight, eps, residual, gate)
    D = x.shape[-1]
    if D > MAX_WIDTH:
        raise ValueError(f"D = {D}: the Triton RMSNorm holds rows of at most {MAX_WIDTH} features")
    operands = [x] + [t for t in (residual, gate) if t is not None]
    if any(row_strides(t) is None for t in operands):
        x, residual, gate = (None if t is None else t.contiguous() for t in (x, residual, gate))
    shape = x.shape
    H = shape[-2] if x.dim() >= 2 else 1
    M = x.numel() // max(D * H, 1)
    (sx_m, sx_h), (sr_m, sr_h), (sg_m, sg_h) = (row_strides(t) if t is not None else (0, 0)
                                                for t in (x, residual, gate))
    dtype = torch.promote_types(x.dtype, weight.dtype) if gate is None else x.dtype
    y = torch.empty(shape, dtype=dtype, device=x.device)
    summed = torch.empty(shape, dtype=torch.promote_types(x.dtype, residual.dtype), device=x.device) \
        if residual is not None else None
    if M * H:
        BD = triton.next_power_of_2(D)
        rms_norm_fwd_kernel[(M * H,)](
            x, weight, residual if residual is not None else x, gate if gate is not None else x, y,
            summed if summed is not None else y, eps, H, sx_m, sx_h, sr_m, sr_h, sg_m, sg_h,
            D=D, BD=BD, HAS_RESIDUAL=residual is not None, HAS_GATE=gate is not None,
            num_warps=min(max(BD // 256, 1), 16))
    return y if summed is None else (y, summed)
