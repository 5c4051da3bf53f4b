"""The one verdict vocabulary of the report, how preconditions decide whether a claim can be judged (each kind of
precondition is built in :mod:`relin.report.preconditions`), and the intervals behind every verdict.

A claim of a paper becomes a measurement: our estimate with a 95% interval, the paper's number, the claim's
preconditions (each computed from the run's own outputs and shown beside the verdict) and one of four outcomes:

- ``not testable here``: a precondition failed (the treatment did not move the model, the student did not learn
  its own tasks, the reference is not competent on what the claim uses, the metric has no headroom, the run did
  not reach the claim's regime, too few training seeds); the verdict names each failed precondition and its
  measured value. Only claims whose preconditions all hold are judged:
- ``reproduced``: the whole interval lies on the claim's side of its threshold (for "A beats B": above the claim's
  margin, fixed in config before the run with its reason);
- ``contradicted``: the whole interval lies on the other side, with what it shows (the other way round; smaller
  than the margin with which side ahead; a tie when the interval holds zero);
- ``inconclusive`` (within noise): the interval allows both the claim and its opposite.

Intervals. Within one training run: a stratified bootstrap over the evaluated items (:class:`Resampler`; every
model scored on the same items is resampled with the same draws, so a difference of two models is paired), or the
Wilson score interval for a proportion of independent right/wrong items (which does not collapse at 0 or n).
Over training seeds (models ``<name>-s<seed>``): a Student-t interval over the per-seed values (paired by seed
index when two arms are compared), joined with the item interval of the seed mean, so that seeds which agree by
chance do not hide the evaluation noise (:func:`over_seeds`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Hashable, Sequence

import numpy as np
from scipy import stats

REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE = "reproduced", "contradicted", "inconclusive", \
    "not testable here"
OUTCOMES = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE)
WITHIN_NOISE = "within noise"
# How a contradiction that reads the comparison the other way round (beyond the margin) begins.
OTHER_WAY = "the other way round"

LEVEL = 0.95
RESAMPLES = 2000


@dataclass(frozen=True)
class Verdict:
    """One outcome of the vocabulary and why: the failed preconditions of a claim not testable here, what the
    interval shows for a contradicted or inconclusive one."""

    outcome: str
    reason: str = ""

    def __post_init__(self) -> None:
        if self.outcome not in OUTCOMES:
            raise ValueError(f"verdict {self.outcome!r}: expected one of {', '.join(OUTCOMES)}")
        if self.outcome == INCONCLUSIVE and not self.reason.startswith(WITHIN_NOISE):
            raise ValueError(f"an inconclusive verdict's reason starts with {WITHIN_NOISE!r}, got {self.reason!r}")
        if self.outcome == NOT_TESTABLE and not self.reason:
            raise ValueError("a claim not testable here names the precondition that failed")

    def __str__(self) -> str:
        return f"{self.outcome} ({self.reason})" if self.reason else self.outcome


def inconclusive(detail: str = "") -> Verdict:
    return Verdict(INCONCLUSIVE, f"{WITHIN_NOISE}: {detail}" if detail else WITHIN_NOISE)


@dataclass(frozen=True)
class Precondition:
    """What must hold for a run to be able to show a claim, and the run's own measured value of it."""

    what: str
    measured: str
    holds: bool
    # holds for a win only: the arm the claim favours sits at the metric's ceiling, so the measured difference is a
    # lower bound on the effect; a tie or a loss may be the ceiling's doing and cannot be read
    only_a_win: bool = False
    # holds for a loss only: the arm the claim disfavours sits at the ceiling (or the favoured one at chance), so the
    # measured difference is an upper bound on the effect; only the other way round beyond the margin can be read
    only_a_loss: bool = False

    def __str__(self) -> str:
        return f"{'✓' if self.holds else '✗'} {self.what}: {self.measured}"


def judged(preconditions: Sequence[Precondition], decide: Callable[[], Verdict]) -> Verdict:
    """``decide()`` when every precondition holds; else ``not testable here`` naming each failed one. Under a
    precondition that holds for a win only (:attr:`Precondition.only_a_win`), any other outcome is not testable; under
    one that holds for a loss only (:attr:`Precondition.only_a_loss`), any outcome but a contradiction the other way
    round."""
    def named(conditions: list[Precondition]) -> str:
        return "; ".join(f"{p.what}: {p.measured}" for p in conditions)

    failed = [p for p in preconditions if not p.holds]
    if failed:
        return Verdict(NOT_TESTABLE, named(failed))
    verdict = decide()
    if verdict is None:
        return verdict
    capped = [p for p in preconditions if p.only_a_win]
    if capped and verdict.outcome != REPRODUCED:
        return Verdict(NOT_TESTABLE, f"{named(capped)} (the run shows {verdict})")
    bounded = [p for p in preconditions if p.only_a_loss]
    if bounded and not (verdict.outcome == CONTRADICTED and verdict.reason.startswith(OTHER_WAY)):
        return Verdict(NOT_TESTABLE, f"{named(bounded)} (the run shows {verdict})")
    return verdict


@dataclass(frozen=True)
class Margin:
    """The smallest difference a comparative claim counts as a win, fixed before the run, and why."""

    value: float
    reason: str


def t_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Student-t interval of the mean of ``values`` (``S - 1`` degrees of freedom)."""
    values = np.asarray(values, dtype=np.float64)
    mean = float(values.mean())
    if values.size < 2:
        return mean, mean
    half = stats.t.ppf((1 + level) / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size)
    return mean - half, mean + half


def wilson(hits: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """Wilson score interval of a proportion ``hits / n`` of independent items (inside [0, 1], and not empty at
    0 or n as a percentile bootstrap is)."""
    if n <= 0:
        return float("nan"), float("nan")
    z = stats.norm.ppf((1 + level) / 2)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Estimate:
    """A statistic of the evaluated items (``value``), its bootstrap replicates (``draws``, ``[R]``), and, for a
    model trained with several seeds, the value of each seed (``per_seed``, ``[S]``).

    Arithmetic between estimates acts replicate by replicate and seed by seed, so ``a - b`` is the paired
    difference (paired items, seeds paired by index; a single-seed operand, e.g. the teacher, is broadcast).
    ``bounds`` is a closed-form interval (Wilson) that replaces the percentile one; ``support`` the range the
    statistic can take (an accuracy's [0, 1]), which clips the t interval over seeds; arithmetic drops both. An
    estimate without replicates (``draws`` empty) is exact: a quantity with no sampling noise.
    """

    value: float
    draws: np.ndarray
    per_seed: np.ndarray | None = None
    bounds: tuple[float, float] | None = field(default=None, compare=False)
    support: tuple[float, float] = (-math.inf, math.inf)

    @classmethod
    def exact(cls, value: float) -> "Estimate":
        return cls(float(value), np.empty(0))

    @property
    def seeds(self) -> int:
        return 1 if self.per_seed is None else int(self.per_seed.size)

    @property
    def low(self) -> float:
        return self._interval()[0]

    @property
    def high(self) -> float:
        return self._interval()[1]

    def _interval(self) -> tuple[float, float]:
        if self.bounds is not None:
            low, high = self.bounds
        else:
            low, high = self._percentile(100 * (1 - LEVEL) / 2), self._percentile(100 * (1 + LEVEL) / 2)
        if self.per_seed is not None and self.per_seed.size > 1 and np.isfinite(self.per_seed).all():
            t_low, t_high = t_interval(self.per_seed)
            low, high = min(low, t_low), max(high, t_high)
        return max(low, self.support[0]), min(high, self.support[1])

    def _percentile(self, q: float) -> float:
        if not self.draws.size:
            return self.value
        finite = self.draws[np.isfinite(self.draws)]
        return float(np.percentile(finite, q)) if finite.size else float("nan")

    def map(self, fn: Callable[[np.ndarray], np.ndarray]) -> "Estimate":
        return Estimate(float(fn(np.asarray(self.value))), fn(self.draws) if self.draws.size else self.draws,
                        None if self.per_seed is None else np.asarray(fn(self.per_seed), dtype=np.float64))

    def _combine(self, other, op) -> "Estimate":
        if isinstance(other, Estimate):
            if self.draws.size and other.draws.size and self.draws.size != other.draws.size:
                raise ValueError("estimates from resamplers of different sizes cannot be combined")
            size = max(self.draws.size, other.draws.size)
            a = self.draws if self.draws.size or not size else np.full(size, self.value)
            b = other.draws if other.draws.size or not size else np.full(size, other.value)
            b_value = np.float64(other.value)
            seeds = _paired_seeds(self, other)
        else:
            a, b, b_value = self.draws, other, other
            seeds = None if self.per_seed is None else (self.per_seed, other)
        with np.errstate(divide="ignore", invalid="ignore"):
            value, draws = op(np.float64(self.value), b_value), op(a, b)
            per_seed = None if seeds is None else np.asarray(op(*seeds), dtype=np.float64)
        return Estimate(float(value), np.asarray(draws, dtype=np.float64), per_seed)

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
        if not self.draws.size and self.per_seed is None and self.bounds is None:
            return f"{self.value * scale:{spec}}{unit}"
        return f"{self.value * scale:{spec}}{unit} [{self.low * scale:{spec}}, {self.high * scale:{spec}}]"


def _paired_seeds(a: Estimate, b: Estimate) -> tuple | None:
    """The per-seed operands of ``a`` and ``b``: paired by seed index (the first ``min(S_a, S_b)``), a single-seed
    side broadcast as its value; ``None`` when neither has seeds."""
    if a.per_seed is None and b.per_seed is None:
        return None
    if a.per_seed is None:
        return a.value, b.per_seed
    if b.per_seed is None:
        return a.per_seed, b.value
    n = min(a.per_seed.size, b.per_seed.size)
    return a.per_seed[:n], b.per_seed[:n]


class Resampler:
    """Stratified bootstrap draws over ``n`` evaluated items, shared by every model scored on them.

    Args:
        strata: per item its stratum (a task family, a length × depth cell, a subtask); each replicate
            draws, within every stratum, as many items as it holds, with replacement.
        resamples: number of replicates ``R``.
        seed: the draws' seed, so a report rebuilt from the same outputs shows the same intervals.
        paired: per stratum a key; strata with the same key hold the same units in the same order (the k-th item of
            each is one test sequence, e.g. a NIAH haystack with its needle at each depth) and share their draws, so
            a difference between them is paired. Such strata must hold as many items.
    """

    def __init__(self, strata: Sequence[Hashable], resamples: int = RESAMPLES, seed: int = 0,
                 paired: Callable[[Hashable], Hashable] | None = None):
        self.strata = list(strata)
        self.n, self.resamples = len(self.strata), resamples
        rng = np.random.default_rng(seed)
        self.index = np.empty((resamples, self.n), dtype=np.int64)
        shared: dict[Hashable, np.ndarray] = {}
        for label in dict.fromkeys(self.strata):
            where = np.flatnonzero(np.array([s == label for s in self.strata]))
            key = (label,) if paired is None else ("paired", paired(label))
            if key not in shared:
                shared[key] = rng.integers(0, where.size, size=(resamples, where.size))
            elif shared[key].shape[1] != where.size:
                raise ValueError(f"stratum {label!r}: {where.size} items, but the strata paired with it hold "
                                 f"{shared[key].shape[1]}")
            self.index[:, where] = where[shared[key]]

    def mask(self, select: Callable[[Hashable], bool] | None = None) -> np.ndarray:
        return np.array([True if select is None else bool(select(s)) for s in self.strata])

    def ratio(self, numerator: Sequence[float], denominator: Sequence[float] | None = None,
              where: np.ndarray | None = None) -> Estimate:
        """``sum(numerator) / sum(denominator)`` over the items ``where`` holds (all by default): a mean of
        per-item scores, or a pooled accuracy (hits over positions) when ``denominator`` is given. A mean of
        right/wrong items (0 or 1 each) carries its Wilson interval."""
        num = np.asarray(numerator, dtype=np.float64)
        den = np.ones_like(num) if denominator is None else np.asarray(denominator, dtype=np.float64)
        if num.shape != (self.n,) or den.shape != (self.n,):
            raise ValueError(f"expected {self.n} per-item values, got {num.shape} and {den.shape}")
        keep = np.ones(self.n, bool) if where is None else np.asarray(where, bool)
        binary = bool(keep.any()) and np.isin(num[keep], (0.0, 1.0)).all() and (den[keep] == 1.0).all()
        share = bool(keep.any()) and (num[keep] >= 0).all() and (num[keep] <= den[keep]).all()
        num, den = np.where(keep, num, 0.0), np.where(keep, den, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            value = num.sum() / den.sum() if den.sum() else float("nan")
            draws = num[self.index].sum(1) / den[self.index].sum(1)
        return Estimate(float(value), draws, bounds=wilson(num.sum(), den.sum()) if binary else None,
                        support=(0.0, 1.0) if share else (-math.inf, math.inf))

    def mean(self, values: Sequence[float], where: np.ndarray | None = None) -> Estimate:
        return self.ratio(values, None, where)


def over_seeds(estimates: Sequence[Estimate]) -> Estimate:
    """The mean over training replicas (one estimate per seed, each resampled over the same items): its draws are
    the item noise of the seed mean, its ``per_seed`` the seeds' values, so its interval is the t interval over
    seeds joined with the item interval. One estimate is returned as it is."""
    if len(estimates) == 1:
        return estimates[0]
    draws = np.stack([e.draws for e in estimates], axis=1).mean(1) if all(e.draws.size for e in estimates) \
        else np.empty(0)
    values = np.array([e.value for e in estimates], dtype=np.float64)
    support = (min(e.support[0] for e in estimates), max(e.support[1] for e in estimates))
    return Estimate(float(values.mean()), draws, values, support=support)


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
        return Verdict(CONTRADICTED, f"the interval lies below {threshold:g}")
    return inconclusive(f"the interval contains {threshold:g}")


def at_most(estimate: Estimate, threshold: float) -> Verdict:
    """Claim ``estimate <= threshold``."""
    if estimate.high <= threshold:
        return Verdict(REPRODUCED)
    if estimate.low > threshold:
        return Verdict(CONTRADICTED, f"the interval lies above {threshold:g}")
    return inconclusive(f"the interval contains {threshold:g}")


def beats(difference: Estimate, margin: Margin, names: tuple[str, str] = ("A", "B"), unit: str = " points"
          ) -> Verdict:
    """Claim "A beats B" from ``difference = A - B`` (paired) and the claim's margin ``m``: reproduced when the
    interval lies above ``m``; inconclusive when it straddles ``m``; contradicted when it lies below ``m``, with what
    it shows: the other way round (below ``-m``), *smaller than the margin* with the side ahead (inside ``±m``,
    excluding zero), a tie (inside ``±m``, holding zero), or B ahead / no win for A otherwise."""
    m, (a, b) = margin.value, names
    low, high = difference.low, difference.high
    if low > m:
        return Verdict(REPRODUCED)
    if high > m:
        return inconclusive(f"the difference's interval [{low:+.3g}, {high:+.3g}] contains the margin +{m:g}")
    if high < -m:
        return Verdict(CONTRADICTED, f"{OTHER_WAY}: {b} ahead by more than the margin ({m:g}{unit})")
    if low >= -m and low > 0:
        return Verdict(CONTRADICTED, f"smaller than the margin: {a} ahead by {low:.3g}–{high:.3g}{unit}, "
                                     f"below {m:g}")
    if low >= -m and high < 0:
        return Verdict(CONTRADICTED, f"smaller than the margin: {b} ahead by {-high:.3g}–{-low:.3g}{unit}, "
                                     f"below {m:g}")
    if low >= -m:
        return Verdict(CONTRADICTED, f"a tie: the difference lies in [{low:+.3g}, {high:+.3g}], within ±{m:g}{unit}")
    if high < 0:
        return Verdict(CONTRADICTED, f"{b} ahead by {-high:.3g}–{-low:.3g}{unit} (the margin is {m:g})")
    return Verdict(CONTRADICTED, f"no win for {a}: the difference lies in [{low:+.3g}, {high:+.3g}], below the "
                                 f"margin +{m:g}{unit}")


def within(difference: Estimate, margin: Margin, unit: str = " points") -> Verdict:
    """Claim "no difference beyond the margin": reproduced when the interval lies inside ±m, contradicted when it
    lies wholly outside, else inconclusive."""
    m, low, high = margin.value, difference.low, difference.high
    if -m <= low and high <= m:
        return Verdict(REPRODUCED)
    if low > m or high < -m:
        return Verdict(CONTRADICTED, f"the difference lies in [{low:+.3g}, {high:+.3g}], beyond ±{m:g}{unit}")
    return inconclusive(f"the difference's interval [{low:+.3g}, {high:+.3g}] reaches past ±{m:g}{unit}")


@dataclass(frozen=True)
class Claim:
    """One row of a verdict table: the paper's claim, its number, ours, the verdict, and what it rested on.

    ``kind`` is ``claim`` (a claim of the paper), ``check`` (an implementation or by-construction check: exact
    init, cache ratio, memory exponents) or ``beyond`` (a claim of no seed paper). ``seeds`` is the fewest training
    seeds of any arm the claim compares (``None`` for a claim with no trained arm)."""

    paper: str
    claim: str
    source: str
    ours: str
    verdict: Verdict
    preconditions: tuple[Precondition, ...] = ()
    kind: str = "claim"
    seeds: int | None = None
    margin: Margin | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"claim kind {self.kind!r}: expected one of {', '.join(KINDS)}")


KINDS = {"claim": "The papers' claims", "check": "Implementation and by-construction checks",
         "beyond": "Beyond the papers: claims of no seed paper"}
# The same tables in one paper's section, after the paper's name.
PAPER_KINDS = {"claim": "the paper's claims", "check": "implementation and by-construction checks",
               "beyond": "claims of no seed paper"}


def conditions_text(claim: Claim) -> str:
    """Each precondition, met (✓) or failed (✗), with its measured value; then the margin."""
    parts = [str(p) for p in claim.preconditions]
    if claim.margin is not None:
        parts.append(f"margin {claim.margin.value:g} ({claim.margin.reason})")
    return "; ".join(parts) or "–"


def verdict_text(claim: Claim) -> str:
    """The verdict cell: the outcome and what its reason adds to the preconditions cell beside it (a claim not
    testable here names its failed preconditions there, with their values, once)."""
    verdict = claim.verdict
    for shown in ([p for p in claim.preconditions if not p.holds], [p for p in claim.preconditions if p.only_a_win]):
        named = "; ".join(f"{p.what}: {p.measured}" for p in shown)
        if named and verdict.reason.startswith(named):
            rest = verdict.reason[len(named):].strip()
            return f"{verdict.outcome} {rest}" if rest else verdict.outcome
    return str(verdict)


def claims_table(title: str, claims: Sequence[Claim], note: str = "", paper_column: bool = False):
    from .table import Table

    first = ["paper"] if paper_column else []
    return Table(title=title, columns=[*first, "claim", "paper's figure", "ours (95% interval)", "seeds", "verdict",
                                       "preconditions"],
                 rows=[[*([c.paper] if paper_column else []), c.claim, c.source, c.ours, c.seeds, verdict_text(c),
                        conditions_text(c)] for c in claims],
                 note=note or INTERVALS)


def tally(claims: Sequence[Claim]) -> str:
    """``"12: 2 reproduced, 3 contradicted, 1 inconclusive, 6 not testable here"``."""
    counts = {o: sum(c.verdict.outcome == o for c in claims) for o in OUTCOMES}
    return f"{len(claims)}: " + ", ".join(f"{n} {o}" for o, n in counts.items() if n) if claims else "0"


def verdict_tables(claims: Sequence[Claim], paper: str = "") -> list:
    """One table per kind present (the claims, the checks, the claims of no seed), in that order: of one paper's
    section (titled after ``paper``), or of every paper (with a paper column) when ``paper`` is empty."""
    titles = {kind: f"{paper}: {title}" for kind, title in PAPER_KINDS.items()} if paper else KINDS
    return [claims_table(titles[kind], rows, paper_column=not paper)
            for kind in KINDS if (rows := [c for c in claims if c.kind == kind])]


INTERVALS = ("Intervals: 95%; over evaluated items (paired bootstrap, Wilson for right/wrong items) for one training "
             "seed; a t interval over seeds joined with the item interval for several. A claim is judged only when "
             "each precondition holds (✓), else it is not testable here; its margin was fixed in config before the "
             "run.")
