"""The one verdict vocabulary of the report, and the intervals behind every verdict.

A claim of a paper becomes a measurement: our estimate with a 95% bootstrap interval over the evaluated
items, the paper's number, and one of three verdicts:

- ``reproduced``: the whole interval lies on the claim's side of its threshold;
- ``contradicted``: the whole interval lies on the other side;
- ``inconclusive``, with its reason: *at chance* (the models compared are indistinguishable from the task's
  chance level), *the reference fails the task* (the teacher or baseline the claim is relative to is below
  the competence threshold), *within noise* (the interval contains the threshold or the tie band's edge),
  *not testable at this scale* (the run cannot measure what the claim is about).

A claim with parts gets a verdict per part. Intervals of one training run cover evaluation noise only (which
items were drawn); with several seeds the replicates also cover training noise.

Bootstrap: every model evaluated on the same items is resampled with the same draws (:class:`Resampler`), so
a difference or ratio of two models is a paired bootstrap; draws are stratified (each stratum, e.g. a task
family, keeps its size), and intervals are the 2.5 and 97.5 percentiles of the replicates. A model trained
with several seeds (``<name>-s<seed>`` replicas) is their mean, its replicates redrawing the seeds too
(:func:`over_seeds`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import numpy as np

REPRODUCED, CONTRADICTED, INCONCLUSIVE = "reproduced", "contradicted", "inconclusive"
AT_CHANCE = "at chance"
REFERENCE_FAILS = "the reference fails the task"
WITHIN_NOISE = "within noise"
NOT_TESTABLE = "not testable at this scale"
REASONS = (AT_CHANCE, REFERENCE_FAILS, WITHIN_NOISE, NOT_TESTABLE)

LEVEL = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Verdict:
    """One outcome of the vocabulary; ``reason`` says why an inconclusive claim is so (and may add detail)."""

    outcome: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in (REPRODUCED, CONTRADICTED, INCONCLUSIVE):
            raise ValueError(f"verdict {self.outcome!r}: expected {REPRODUCED}, {CONTRADICTED} or {INCONCLUSIVE}")
        if self.outcome == INCONCLUSIVE and not self.reason.startswith(REASONS):
            raise ValueError(f"inconclusive verdict needs a reason starting with one of {REASONS}, got {self.reason!r}")

    def __str__(self) -> str:
        return f"{self.outcome} ({self.reason})" if self.reason else self.outcome


def inconclusive(reason: str, detail: str = "") -> Verdict:
    return Verdict(INCONCLUSIVE, f"{reason}: {detail}" if detail else reason)


@dataclass(frozen=True)
class Estimate:
    """A statistic of the evaluated items (``value``) and its bootstrap replicates (``draws``, ``[R]``).

    Arithmetic between estimates of the same :class:`Resampler` acts replicate by replicate, so ``a - b`` is
    the paired bootstrap of a difference. An estimate without replicates (``draws`` empty) is exact: a
    quantity with no sampling noise (a config constant, a measured gap).
    """

    value: float
    draws: np.ndarray

    @classmethod
    def exact(cls, value: float) -> "Estimate":
        return cls(float(value), np.empty(0))

    @property
    def low(self) -> float:
        return self._percentile(100 * (1 - LEVEL) / 2)

    @property
    def high(self) -> float:
        return self._percentile(100 * (1 + LEVEL) / 2)

    def _percentile(self, q: float) -> float:
        if not self.draws.size:
            return self.value
        finite = self.draws[np.isfinite(self.draws)]
        return float(np.percentile(finite, q)) if finite.size else float("nan")

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> "Estimate":
        return Estimate(float(fn(np.asarray(self.value))), fn(self.draws) if self.draws.size else self.draws)

    def _combine(self, other, op) -> "Estimate":
        if isinstance(other, Estimate):
            if self.draws.size and other.draws.size and self.draws.size != other.draws.size:
                raise ValueError("estimates from resamplers of different sizes cannot be combined")
            size = max(self.draws.size, other.draws.size)
            a = self.draws if self.draws.size or not size else np.full(size, self.value)
            b = other.draws if other.draws.size or not size else np.full(size, other.value)
            b_value = np.float64(other.value)
        else:
            a, b, b_value = self.draws, other, other
        with np.errstate(divide="ignore", invalid="ignore"):
            value, draws = op(np.float64(self.value), b_value), op(a, b)
        return Estimate(float(value), np.asarray(draws, dtype=np.float64))

    def __add__(self, other) -> "Estimate":
        return self._combine(other, np.add)

    def __sub__(self, other) -> "Estimate":
        return self._combine(other, np.subtract)

    def __mul__(self, other) -> "Estimate":
        return self._combine(other, np.multiply)

    def __truediv__(self, other) -> "Estimate":
        return self._combine(other, np.divide)

    __radd__ = __add__
    __rmul__ = __mul__

    def text(self, spec: str = ".1f", scale: float = 1.0, unit: str = "") -> str:
        """``"12.3% [10.1, 14.5]"`` (value with ``unit``, then the interval, times ``scale``); an exact value
        without an interval."""
        if not np.isfinite(self.value):
            return "–"
        if not self.draws.size:
            return f"{self.value * scale:{spec}}{unit}"
        return f"{self.value * scale:{spec}}{unit} [{self.low * scale:{spec}}, {self.high * scale:{spec}}]"


class Resampler:
    """Stratified bootstrap draws over ``n`` evaluated items, shared by every model scored on them.

    Args:
        strata: per item its stratum (a task family, a length × depth cell, a subtask); each replicate
            draws, within every stratum, as many items as it holds, with replacement.
        resamples: number of replicates ``R``.
        seed: the draws' seed, so a report rebuilt from the same outputs shows the same intervals.
    """

    def __init__(self, strata: Sequence[Hashable], resamples: int = RESAMPLES, seed: int = 0):
        self.strata = list(strata)
        self.n, self.resamples = len(self.strata), resamples
        rng = np.random.default_rng(seed)
        self.index = np.empty((resamples, self.n), dtype=np.int64)
        for label in dict.fromkeys(self.strata):
            where = np.flatnonzero(np.array([s == label for s in self.strata]))
            self.index[:, where] = where[rng.integers(0, where.size, size=(resamples, where.size))]

    def mask(self, select: Callable[[Hashable], bool] | None = None) -> np.ndarray:
        return np.array([True if select is None else bool(select(s)) for s in self.strata])

    def ratio(self, numerator: Sequence[float], denominator: Sequence[float] | None = None,
              where: np.ndarray | None = None) -> Estimate:
        """``sum(numerator) / sum(denominator)`` over the items ``where`` holds (all by default): a mean of
        per-item scores, or a pooled accuracy (hits over positions) when ``denominator`` is given."""
        num = np.asarray(numerator, dtype=np.float64)
        den = np.ones_like(num) if denominator is None else np.asarray(denominator, dtype=np.float64)
        if num.shape != (self.n,) or den.shape != (self.n,):
            raise ValueError(f"expected {self.n} per-item values, got {num.shape} and {den.shape}")
        keep = np.ones(self.n, bool) if where is None else np.asarray(where, bool)
        num, den = np.where(keep, num, 0.0), np.where(keep, den, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = num.sum() / den.sum() if den.sum() else float("nan")
            return Estimate(float(value), num[self.index].sum(1) / den[self.index].sum(1))

    def mean(self, values: Sequence[float], where: np.ndarray | None = None) -> Estimate:
        return self.ratio(values, None, where)


def over_seeds(estimates: Sequence[Estimate], seed: int = 0) -> Estimate:
    """The mean over training replicas (one estimate per seed, each resampled over the same items): each bootstrap
    replicate also redraws the seeds with replacement, so the interval covers training noise as well as
    evaluation noise (a two-level bootstrap). One estimate is returned as it is."""
    if len(estimates) == 1:
        return estimates[0]
    draws = np.stack([e.draws for e in estimates], axis=1)                       # [R, S]
    index = np.random.default_rng(seed).integers(0, len(estimates), size=draws.shape)
    return Estimate(float(np.mean([e.value for e in estimates])), np.take_along_axis(draws, index, 1).mean(1))


def mean_of(estimates: Sequence[Estimate]) -> Estimate:
    """The unweighted mean of estimates (e.g. of families), replicate by replicate."""
    if not estimates:
        raise ValueError("mean of no estimates")
    total = estimates[0]
    for e in estimates[1:]:
        total = total + e
    return total * (1.0 / len(estimates))


def at_least(estimate: Estimate, threshold: float) -> Verdict:
    """Claim ``estimate >= threshold``: reproduced when the interval lies above it, contradicted when below."""
    if estimate.low >= threshold:
        return Verdict(REPRODUCED)
    if estimate.high < threshold:
        return Verdict(CONTRADICTED)
    return inconclusive(WITHIN_NOISE, f"the interval contains {threshold:g}")


def at_most(estimate: Estimate, threshold: float) -> Verdict:
    """Claim ``estimate <= threshold``."""
    if estimate.high <= threshold:
        return Verdict(REPRODUCED)
    if estimate.low > threshold:
        return Verdict(CONTRADICTED)
    return inconclusive(WITHIN_NOISE, f"the interval contains {threshold:g}")


def beats(difference: Estimate, tie: float = 0.0) -> Verdict:
    """Claim "A beats B" from ``difference = A - B`` (paired): reproduced when the interval lies above the tie
    band ``[-tie, tie]``; contradicted when it lies below the band's upper edge (a tie or B better);
    inconclusive (within noise) when it straddles that edge."""
    if difference.low > tie:
        return Verdict(REPRODUCED)
    if difference.high < -tie:
        return Verdict(CONTRADICTED, "the other way round")
    if difference.high < tie:
        if difference.low >= -tie:
            return Verdict(CONTRADICTED, f"a tie: the difference lies within ±{tie:g}" if tie else "")
        return Verdict(CONTRADICTED, f"behind or tied: the difference lies in [{difference.low:.3g}, "
                                     f"{difference.high:.3g}], below +{tie:g}")
    return inconclusive(WITHIN_NOISE, f"the difference's interval contains {tie:g}" if tie else
                        "the difference's interval contains 0")


def within(estimate: Estimate, target: float, tolerance: float) -> Verdict:
    """Claim ``estimate ≈ target``: reproduced when the interval lies inside ``target ± tolerance``,
    contradicted when it lies wholly outside."""
    low, high = target - tolerance, target + tolerance
    if estimate.low >= low and estimate.high <= high:
        return Verdict(REPRODUCED)
    if estimate.high < low or estimate.low > high:
        return Verdict(CONTRADICTED)
    return inconclusive(WITHIN_NOISE, f"the interval overlaps {target:g} ± {tolerance:g} without lying inside")


def indistinguishable_from_chance(estimate: Estimate, chance: float) -> bool:
    """The interval reaches the chance level (or lies below it)."""
    return estimate.low <= chance


def chance_guard(models: dict[str, Estimate], chance: float, what: str = "") -> Verdict | None:
    """An inconclusive verdict when every model compared is indistinguishable from ``chance``, else ``None``."""
    if models and all(indistinguishable_from_chance(e, chance) for e in models.values()):
        names = ", ".join(models)
        return inconclusive(AT_CHANCE, f"{names} within reach of chance ({chance:g}{' ' + what if what else ''})")
    return None


def reference_guard(reference: str, score: Estimate | float | None, threshold: float) -> Verdict | None:
    """An inconclusive verdict when the reference the claim is relative to scores below ``threshold``."""
    value = score.value if isinstance(score, Estimate) else score
    if value is None or not np.isfinite(value) or value < threshold:
        shown = "no score" if value is None or not np.isfinite(value) else f"{value:.2f}"
        return inconclusive(REFERENCE_FAILS, f"{reference} {shown} < {threshold:g}")
    return None


@dataclass(frozen=True)
class Claim:
    """One row of a verdict table: the paper's claim, its number, ours and the verdict."""

    paper: str
    claim: str
    source: str
    ours: str
    verdict: Verdict


def claims_table(title: str, claims: Sequence[Claim], note: str = ""):
    from .table import Table

    return Table(title=title, columns=["claim", "paper", "ours (95% interval)", "verdict"],
                 rows=[[c.claim, c.source, c.ours, str(c.verdict)] for c in claims],
                 note=note or EVALUATION_NOISE)


EVALUATION_NOISE = ("Intervals: 95% bootstrap over the evaluated items (paired where two models are compared on the "
                    "same items); from one training run they cover evaluation noise only, not training noise.")
