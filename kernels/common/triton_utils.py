"""Keeping Triton kernels runnable under the CPU interpreter, and tile widths that Hopper serves.

Rules (see notes/kernels.md): bypass autotuning when interpreting (the autotuner benchmarks through a GPU
driver), cast loop variables with ``tl.cast`` rather than ``.to()``.
"""
from __future__ import annotations

import triton

from .backend import interpreting

# Narrowest tile along a feature dim (K or V). 16-wide operands made Triton 3.6 emit out-of-bounds shared-memory
# reads on the H200 (compute-sanitizer: "Invalid __shared__ read" in the gated delta rule's gradient kernel at
# K = 16); every 32-wide case ran clean, so smaller head dims are served by masked 32-wide tiles.
MIN_TILE = 32


def autotune(configs, key, **kwargs):
    """``triton.autotune`` on a GPU; the first config alone under the interpreter."""
    if interpreting():
        return triton.autotune(configs=configs[:1], key=key, **kwargs)
    return triton.autotune(configs=configs, key=key, **kwargs)


def tile(dim: int, cap: int) -> int:
    """Tile width along a feature dim of size ``dim``: a power of two in [MIN_TILE, max(cap, MIN_TILE)]."""
    return max(MIN_TILE, min(cap, triton.next_power_of_2(dim)))
