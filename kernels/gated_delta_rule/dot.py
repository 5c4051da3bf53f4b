"""The one matrix product of the gated delta rule kernels: operands rounded to the compute dtype.

For 16-bit inputs the compute dtype is the input dtype, so products run on the bf16/fp16 tensor cores
with fp32 accumulation, as in fla; for fp32 inputs it is fp32 with exact (ieee) products.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..common.interpreter_dot import mma


@triton.jit
def dot(a, b, DT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    """a @ b with an fp32 result, both operands first cast to DT."""
    return mma(a.to(DT), b.to(DT), PRECISION, WIDEN)
