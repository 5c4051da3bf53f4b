"""Learning-rate schedules as multipliers of the peak lr, one value per optimizer step.

- ``cosine``: linear warmup, then cosine decay to ``min_lr_ratio``.
- ``wsd`` (warmup-stable-decay, MiniCPM, Hu et al. 2024): linear warmup, constant at the peak, then a
  linear decay to ``min_lr_ratio`` over the last ``decay_fraction`` of the steps.
- ``constant``: linear warmup, then the peak.
"""
from __future__ import annotations

import math
from typing import Callable

from ..errors import ConfigError


def lr_multiplier(schedule: str, total_steps: int, warmup_steps: int, min_lr_ratio: float,
                  decay_fraction: float = 0.2) -> Callable[[int], float]:
    """``f(step) -> multiplier`` for ``step`` in ``[0, total_steps]`` (the lr used by update ``step + 1``)."""
    warmup = min(warmup_steps, total_steps)

    def warm(step: int) -> float | None:
        return (step + 1) / (warmup + 1) if step < warmup else None

    if schedule == "cosine":
        def cosine(step: int) -> float:
            w = warm(step)
            if w is not None:
                return w
            progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
            return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))
        return cosine
    if schedule == "wsd":
        decay_start = max(warmup, total_steps - round(decay_fraction * total_steps))

        def wsd(step: int) -> float:
            w = warm(step)
            if w is not None:
                return w
            if step < decay_start:
                return 1.0
            progress = min(1.0, (step - decay_start) / max(1, total_steps - decay_start))
            return 1.0 - (1 - min_lr_ratio) * progress
        return wsd
    if schedule == "constant":
        return lambda step: warm(step) or 1.0
    raise ConfigError(f"schedule: expected cosine, wsd or constant, got {schedule!r}")
