"""``tl.dot`` that also gives the right answer for 16-bit inputs under the Triton CPU interpreter.

The interpreter (triton 3.9) stores bfloat16 as raw uint16 and its dot multiplies those bit patterns, so
any bf16 ``tl.dot`` returns garbage there. Under the interpreter, 16-bit operands are widened to fp32
(exact) before the product; on a GPU the operands go to the tensor cores unchanged.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .backend import interpreting


def dot_mode(dtype: torch.dtype) -> tuple[str, bool]:
    """(input precision, widen to fp32 first) for tl.dot on operands of ``dtype``."""
    if dtype == torch.float32:
        return "ieee", False
    return "tf32", interpreting()


@triton.jit
def mma(a, b, PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    """a @ b with an fp32 result; pass ``*dot_mode(dtype)`` from the launcher."""
    if WIDEN:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    return tl.dot(a, b, input_precision=PRECISION)
