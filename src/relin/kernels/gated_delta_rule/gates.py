"""Gated DeltaNet's per-head gates g and β from the a/b projections in one kernel (the PyTorch expression is a
dozen elementwise launches per layer and decoding step). Forward only."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import use_triton
from .ref import naive_gdn_gates

# PyTorch's softplus returns x itself above this (its default threshold).
SOFTPLUS_THRESHOLD = 20.0


@triton.jit(do_not_specialize=["N", "H", "sa_m", "sb_m"])
def gdn_gates_kernel(a, b, A_log, dt_bias, real, g, beta, beta_scale, N, H, sa_m, sb_m,
                     BLOCK: tl.constexpr, HAS_REAL: tl.constexpr, THRESHOLD: tl.constexpr):
    o = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = o < N
    i_m, i_h = o // H, o % H
    b_a = tl.load(a + i_m * sa_m + i_h, mask=m, other=0.).to(tl.float32)
    b_b = tl.load(b + i_m * sb_m + i_h, mask=m, other=0.).to(tl.float32)
    b_x = b_a + tl.load(dt_bias + i_h, mask=m, other=0.).to(tl.float32)
    b_softplus = tl.where(b_x > THRESHOLD, b_x, tl.log(1. + tl.exp(tl.minimum(b_x, THRESHOLD))))
    b_g = -tl.exp(tl.load(A_log + i_h, mask=m, other=0.).to(tl.float32)) * b_softplus
    b_beta = tl.sigmoid(b_b) * beta_scale
    if HAS_REAL:
        b_r = tl.load(real + i_m, mask=m, other=0.).to(tl.float32)
        b_g, b_beta = b_g * b_r, b_beta * b_r
    tl.store(g + o, b_g, mask=m)
    tl.store(beta + o, b_beta, mask=m)


def gdn_gates(a: torch.Tensor, b: torch.Tensor, A_log: torch.Tensor, dt_bias: torch.Tensor, beta_scale: float = 1.0,
              real: torch.Tensor | None = None, backend: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``g, beta [..., H]`` (fp32, contiguous) from ``a, b [..., H]`` (heads contiguous, the leading dims
    flattening to one stride: e.g. slices of a fused projection), ``A_log, dt_bias [H]`` and ``real [...]``
    (0 = padding); see :func:`naive_gdn_gates`. ``backend``: ``auto`` | ``triton`` | ``torch``."""
    H = a.shape[-1]
    if b.shape != a.shape or A_log.shape != (H,) or dt_bias.shape != (H,):
        raise ValueError(f"gdn_gates: a, b must share a shape [..., H] and A_log, dt_bias be [H]; got a "
                         f"{tuple(a.shape)}, b {tuple(b.shape)}, A_log {tuple(A_log.shape)}, "
                         f"dt_bias {tuple(dt_bias.shape)}")
    if real is not None and real.shape != a.shape[:-1]:
        raise ValueError(f"real must be {tuple(a.shape[:-1])}; got {tuple(real.shape)}")
    if not use_triton(a, backend):
        return naive_gdn_gates(a, b, A_log, dt_bias, beta_scale, real)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (a, b, A_log, dt_bias)):
        raise NotImplementedError("gdn_gates has no backward; train through the layer's PyTorch path")
    a2, b2 = (t.reshape(-1, H) if t.dim() != 2 else t for t in (a, b))
    if a2.stride(-1) != 1 or b2.stride(-1) != 1:
        a2, b2 = a2.contiguous(), b2.contiguous()
    g = torch.empty(a.shape, dtype=torch.float32, device=a.device)
    beta = torch.empty_like(g)
    N, BLOCK = a.numel(), 256
    if N:
        gdn_gates_kernel[(triton.cdiv(N, BLOCK),)](
            a2, b2, A_log, dt_bias, real.reshape(-1) if real is not None else a2, g, beta, beta_scale, N, H,
            a2.stride(0), b2.stride(0), BLOCK=BLOCK, HAS_REAL=real is not None, THRESHOLD=SOFTPLUS_THRESHOLD,
            num_warps=4)
    return g, beta
