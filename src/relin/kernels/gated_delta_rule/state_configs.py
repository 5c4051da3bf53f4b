"""Autotuning configs of the serial state passes, shared by the whole-sequence kernels (``triton_fwd``,
``triton_bwd``) and the segment kernels (``triton_segments``), which tune over the same tiles."""
from __future__ import annotations

import triton

# Narrow V blocks multiply the programs of the serial pass when sequences x heads is small, which is all the
# parallelism it has. 8 warps split a product's N over two warpgroups, so their V blocks are 64 wide (16 per
# warpgroup faulted on the H200 with Triton 3.6). fp32 inputs overflow shared memory at 3 stages, hence the
# 8-warp 2-stage config.
FWD_STATE_CONFIGS = [triton.Config({"BV": bv}, num_warps=warps, num_stages=stages)
                     for bv, warps, stages in ((16, 2, 3), (32, 4, 3), (32, 4, 2), (64, 4, 2), (64, 8, 2))]
# The backward state pass holds three more tiles than the forward's: at 2 warps it spills kilobytes per thread
# (offline sm_90), so its configs start at 4 warps; 8 warps 2 stages (64 wide) for fp32 inputs, as in the forward.
BWD_STATE_CONFIGS = [triton.Config({"BV": bv}, num_warps=warps, num_stages=stages)
                     for bv, warps, stages in ((32, 4, 3), (16, 4, 2), (64, 8, 2), (64, 4, 2))]


def parallel_width(units: int, heads: int, cap: int = 1024) -> int:
    """Units x heads rounded up to a power of two, at most ``cap``: an autotuning key on the number of programs
    (the best BV and warps depend on it) with few distinct values. Units are sequences for the serial passes and
    chunks for the output pass."""
    return min(triton.next_power_of_2(units * heads), cap)
