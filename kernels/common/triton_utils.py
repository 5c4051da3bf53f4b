"""Small helpers that keep Triton kernels runnable under the CPU interpreter.

Rules (see notes/kernels.md): bypass autotuning when interpreting (the autotuner benchmarks
through a GPU driver), cast loop variables with ``tl.cast`` rather than ``.to()``, and use ieee
precision for fp32 dots so CPU and GPU agree.
"""
from __future__ import annotations

import triton

from .backend import interpreting


def autotune(configs, key, **kwargs):
    """``triton.autotune`` on a GPU; the first config alone under the interpreter."""
    if interpreting():
        return triton.autotune(configs=configs[:1], key=key, **kwargs)
    return triton.autotune(configs=configs, key=key, **kwargs)


def dot_precision(fp32: bool) -> str:
    """Input precision for ``tl.dot``: ieee for fp32 inputs (exact reference match), tf32 never."""
    return "ieee" if fp32 else "tf32"
