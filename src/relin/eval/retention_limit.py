"""What eqs. 3-5 allow the bridge NIAH, apart from training: the weight a needle keeps when it is read.

A write at step j reaches the read at step t through the state M_{t,s} scaled by λ_s^(t−j) (eq. 3); the mixer
(eq. 4) can at best put all its weight on the slowest scale, so the needle keeps at most w = λ_max^d of its
write, d = t − j, against O(1) for the writes just before the read. For the needle to weigh as much as a
recent pair, its write gate would have to exceed theirs by a factor 1 / w: a gate-logit margin of
d · ln(1 / λ_max) (σ(z) ≈ e^z for the small gates of the distractors). The gate sees only its own pair
(x^conv, eq. 2), not the query, so it cannot single out the needle: in the key-value NIAH every pair is a
needle until the query names one. Below fp32's resolution (2^-23 of the state's O(1) sum) the needle is lost
to rounding, whatever was learned: such a cell is impossible under eqs. 3-5.
"""
from __future__ import annotations

import math

FP32_RESOLUTION = 2.0 ** -23


def needle_distance(length: int, depth: float) -> int:
    """Steps from the needle pair (pair index round(depth · (L − 2)), :func:`relin.eval.bridge_niah.niah_batch`) to
    the query at L − 1."""
    return length - 1 - int(round(depth * (length - 2)))


def retention_grid(slowest_decay: float, lengths: list[int], depths: list[float]) -> list[dict]:
    """Per (length, depth): the distance, the weight kept ``λ_max^d``, the gate-logit margin ``d · ln(1/λ_max)`` that
    would restore it, and whether it is below fp32 resolution (impossible under eqs. 3-5)."""
    rows = []
    for length in lengths:
        for depth in depths:
            d = needle_distance(length, depth)
            kept = slowest_decay ** d
            rows.append({"length": length, "depth": depth, "distance": d, "retained": kept,
                         "gate_logit_margin": round(d * math.log(1 / slowest_decay), 3),
                         "impossible": kept < FP32_RESOLUTION})
    return rows
