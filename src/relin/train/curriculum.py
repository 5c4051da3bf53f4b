"""OPAL's horizon curriculum (Table 7): rollouts start ``initial`` tokens long and the horizon doubles,
up to ``maximum``, whenever the KL stops improving.

The rule, with the paper's "relative KL gain < 2% over 30 steps" made exact: over the last ``window``
steps since the horizon last changed, the gain is ``(mean of the first fifth − mean of the last
fifth) / mean of the first fifth`` of the per-token KL; when it is below ``threshold`` the horizon
doubles and the window starts afresh (a longer horizon changes the per-token KL itself).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class HorizonCurriculum:
    initial: int
    maximum: int
    window: int = 30
    threshold: float = 0.02
    horizon: int = 0
    recent: list[float] = field(default_factory=list)
    doublings: list[int] = field(default_factory=list)

    def __post_init__(self):
        self.horizon = self.horizon or self.initial

    def gain(self) -> float | None:
        """The relative KL gain over the full window, or None until the window is full."""
        if len(self.recent) < self.window:
            return None
        fifth = max(1, self.window // 5)
        first, last = self.recent[:fifth], self.recent[-fifth:]
        start = sum(first) / len(first)
        return (start - sum(last) / len(last)) / start if start > 0 else 0.0

    def observe(self, step: int, kl: float) -> bool:
        """Record step ``step``'s per-token KL; returns True when the horizon doubles after it."""
        self.recent = (self.recent + [kl])[-self.window:]
        gain = self.gain()
        if gain is None or gain >= self.threshold or self.horizon >= self.maximum:
            return False
        self.horizon = min(2 * self.horizon, self.maximum)
        self.recent = []
        self.doublings.append(step)
        return True

    def state_dict(self) -> dict:
        return {"horizon": self.horizon, "recent": list(self.recent), "doublings": list(self.doublings)}

    def load_state_dict(self, state: dict) -> None:
        self.horizon, self.recent, self.doublings = state["horizon"], list(state["recent"]), list(state["doublings"])


@dataclass
class ReplayedHorizons:
    """The horizons another run used, step by step (``horizons[s - 1]`` at step ``s``): a control that must
    roll out what the on-policy run did, whatever its own KL does. Same interface as
    :class:`HorizonCurriculum`."""

    horizons: list[int]
    horizon: int = 0
    step: int = 0

    def __post_init__(self):
        if not self.horizons:
            raise ValueError("no horizons to replay")
        self.horizon = self.horizons[min(self.step, len(self.horizons) - 1)]

    def observe(self, step: int, kl: float) -> bool:
        self.step = step
        previous, self.horizon = self.horizon, self.horizons[min(step, len(self.horizons) - 1)]
        return self.horizon != previous

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]
        self.horizon = self.horizons[min(self.step, len(self.horizons) - 1)]
