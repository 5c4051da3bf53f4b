"""The one matrix product of the Triton kernels, also right for 16-bit inputs under the CPU interpreter.

On a GPU, operands are cast to a compute dtype ``DT`` and multiplied with fp32 accumulation: 16-bit operands
on the bf16/fp16 tensor cores, fp32 operands exactly (``ieee``) or as tf32. The Triton interpreter (3.9)
stores bfloat16 as raw uint16 and its dot multiplies those bit patterns, so under it the operands are
widened to fp32 (exact) instead.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .backend import interpreting


def dot_mode(dtype: torch.dtype) -> tuple[str, bool]:
    """(input precision of fp32 operands, widen under the interpreter) for inputs of ``dtype``: exact
    products for fp32 inputs, tf32 for the fp32 operands that 16-bit inputs produce."""
    if dtype == torch.float32:
        return "ieee", False
    return "tf32", interpreting()


@triton.jit
def dot(a, b, DT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    """a @ b with an fp32 result, both operands first cast to DT; pass ``*dot_mode(dtype)`` from the launcher."""
    if WIDEN:
        return tl.dot(a.to(DT).to(tl.float32), b.to(DT).to(tl.float32), input_precision="ieee")
    return tl.dot(a.to(DT), b.to(DT), input_precision=PRECISION)
