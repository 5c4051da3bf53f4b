"""A training step's metrics on their way from the device to a history row.

:class:`PendingMetrics` keeps each step's reduced metrics and gradient norm on the device until a step has to
read them (it logs, checkpoints or adapts its source), then reads them all in one copy, so the host never waits on
the GPU in between. :class:`NonFiniteSteps` decides which settled step stops the run, and :class:`IntervalMeter`
averages the settled steps' metrics between two logged steps.
"""
from __future__ import annotations

import math
import time

import torch


class PendingMetrics:
    """Steps whose metrics and gradient norm are still on the device, in step order."""

    def __init__(self) -> None:
        self._steps: list[tuple[int, list[str], torch.Tensor]] = []

    def push(self, step: int, names: list[str], values: torch.Tensor) -> None:
        """Step ``step``'s ``values``: one per metric of ``names``, then the gradient norm."""
        self._steps.append((step, names, values))

    def read(self) -> list[tuple[int, dict[str, float], float]]:
        """``(step, metrics, gradient norm)`` of every pending step, in one copy to the host: the loop's only wait
        on the device (a step that neither logs, checkpoints nor adapts its source queues its kernels behind the
        last one's)."""
        flat = torch.cat([values for *_, values in self._steps]).tolist()
        settled, at = [], 0
        for step, names, _ in self._steps:
            row, at = flat[at:at + len(names) + 1], at + len(names) + 1
            settled.append((step, dict(zip(names, row[:-1])), row[-1]))
        self._steps.clear()
        return settled


class NonFiniteSteps:
    """Stops a run at a NaN/inf loss, and at a NaN/inf gradient norm (whose update was dropped) once more than
    ``limit`` such steps were skipped; ``skipped`` counts them across resumes."""

    def __init__(self, limit: int, skipped: int):
        self.limit, self.skipped = limit, skipped

    def problem(self, metrics: dict[str, float], norm: float) -> str | None:
        """Why the run stops at this step, or ``None``; a finite ``norm`` joins ``metrics`` as ``grad_norm``."""
        loss = metrics["loss"]
        if not math.isfinite(loss):
            return f"loss became {loss}"
        if math.isfinite(norm):
            metrics["grad_norm"] = norm
            return None
        self.skipped += 1
        if self.skipped > self.limit:
            return (f"gradient norm became {norm} ({self.skipped - 1} non-finite steps skipped before; "
                    f"train.skip_nonfinite_steps is {self.limit})")
        return None


class IntervalMeter:
    """The settled steps' metric means (their maxima for names ending ``_max``, the objectives' maxima) and the
    tokens read per second since the last logged step."""

    def __init__(self) -> None:
        self.restart(time.perf_counter())

    def restart(self, now: float) -> None:
        self.tokens, self.start = 0, now
        self.sums: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def add(self, metrics: dict[str, float]) -> None:
        for name, value in metrics.items():
            if name.endswith("_max"):
                self.sums[name] = max(self.sums.get(name, value), value)
                self.counts[name] = 1
                continue
            self.sums[name] = self.sums.get(name, 0.0) + value
            self.counts[name] = self.counts.get(name, 0) + 1

    def means(self) -> dict[str, float]:
        return {name: total / self.counts[name] for name, total in self.sums.items()}

    def tokens_per_s(self, now: float) -> float:
        return self.tokens / max(now - self.start, 1e-9)
