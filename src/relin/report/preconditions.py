"""Every precondition a claim can rest on: what the run must show before the claim is judged, each computed from the
run's own outputs and shown beside the verdict with its measured value.

One constructor per kind of precondition; the report's sections compute the measured values and call these, and
nothing else builds a :class:`~relin.report.verdicts.Precondition` (a test checks both, and that each constructor
passes on some input and fails on another: no precondition is a constant). A precondition states what the paper's
own setting guarantees and what the effect needs:

- the reference is competent on what the claim uses (:func:`competent`); a reference trained on the task the
  students never saw leaves only a win readable (``trained_on``);
- the students learned their own tasks (:func:`learned`), or a probe learned at the lengths it trained on;
- the treatment moved the model from its parent, its interval clear of the margin (:func:`moved`);
- the metric has headroom: no arm at the ceiling, every arm's interval above chance by the margin, with a win
  readable when only the arm the claim favours is at the ceiling or only the arm it disfavours at chance
  (:func:`headroom`);
- the run reached the claim's regime (:func:`reached`), has the items the claim reads (:func:`items`), enough
  training seeds (:func:`enough_seeds`), a measurement exact enough (:func:`exact`), a condition kept apart
  (:func:`different`), a quantity inside a band (:func:`within`).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .verdicts import Estimate, Precondition


def competent(reference: str, scores: Mapping[str, float], threshold: float,
              trained_on: Sequence[str] = ()) -> Precondition:
    """The reference (teacher, text-only LLM, MHA) scores at least ``threshold`` on every family or category the claim
    uses. ``trained_on``: the families among them the reference trained on while the students did not: the reference
    is then stronger than the paper's (which meets them zero-shot), so a student reaching it is a win and falling short
    of it says nothing (:attr:`Precondition.only_a_win`)."""
    shown = ", ".join(f"{k} {v:.2f}" for k, v in scores.items()) or "no score"
    ok = bool(scores) and all(np.isfinite(v) and v >= threshold for v in scores.values())
    trained = [f for f in scores if f in trained_on]
    if trained:
        shown += f"; trained on {', '.join(trained)}, which the students never saw: only a win can be read"
    return Precondition(f"{reference} competent (≥ {threshold:g}) on each family used", shown, ok,
                        only_a_win=ok and bool(trained))


def learned(who: str, what: str, estimate: Estimate | None, threshold: float, shown: str) -> Precondition:
    """``who`` learned ``what``: its score there is at least ``threshold`` (a student's recovery of the teacher on its
    own training tasks, a probe's accuracy at the lengths it trained on); ``shown`` is that score as measured."""
    return Precondition(f"{who} learned {what}", shown if estimate is not None else "nothing scored",
                        estimate is not None and bool(estimate.value >= threshold))


def above_chance(who: str, estimate: Estimate, chance: float, margin: float) -> Precondition:
    """``who`` scores above chance: its interval lies above ``chance + margin``."""
    return Precondition(f"{who} above chance {chance:g} by {margin:g}", f"{estimate.value:.3g} [{estimate.low:.3g}, "
                        f"{estimate.high:.3g}]", bool(estimate.low > chance + margin))


def enough_seeds(arms: Mapping[str, Estimate], minimum: int) -> Precondition:
    """Every arm compared rests on at least ``minimum`` training seeds."""
    counts = {name: e.seeds for name, e in arms.items()}
    shown = ", ".join(f"{k} {v}" for k, v in counts.items())
    return Precondition(f"training seeds per arm (≥ {minimum})", shown,
                        bool(counts) and min(counts.values()) >= minimum)


def headroom(arms: Mapping[str, Estimate], ceiling: float, chance: float, margin: float,
             favoured: str | None = None) -> Precondition:
    """The metric can show a difference of ``margin``: no arm within ``margin`` of the ceiling, and every arm's interval
    above chance by ``margin`` (two arms at chance differ by noise, whatever the interval says).

    A bound on one side makes the measured difference a bound on the effect, so one outcome stays readable. A win
    (:attr:`Precondition.only_a_win`) when the arm the claim favours (``favoured``) is alone at the ceiling, the
    others clear of chance, or when every other arm is at chance and the favoured one clear of it (the floor hides how
    far below it they are). A loss the other way round (:attr:`Precondition.only_a_loss`) when every other arm is at
    the ceiling and the favoured one below it, or the favoured arm alone at chance. Anything else there may be the
    ceiling's or the floor's doing and cannot be read."""
    at_ceiling = [n for n, e in arms.items() if e.value >= ceiling - margin]
    at_chance = [n for n, e in arms.items() if not e.low > chance + margin]
    shown = ", ".join(f"{n} {e.value:.3g} [{e.low:.3g}, {e.high:.3g}]" for n, e in arms.items())
    others = [n for n in arms if n != favoured]
    bounded = favoured is not None and bool(others)
    capped = bounded and at_ceiling == [favoured] and not at_chance
    floored = bounded and not at_ceiling and at_chance == others
    overtopped = bounded and at_ceiling == others and favoured not in at_chance
    sunk = bounded and at_chance == [favoured] and not at_ceiling
    if at_ceiling:
        shown += f"; at the ceiling {ceiling:g}: {', '.join(at_ceiling)}"
    if at_chance:
        shown += f"; within {margin:g} of chance {chance:g}: {', '.join(at_chance)}"
    if capped or floored:
        shown += (" (the arm the claim favours at the ceiling" if capped else " (only the arms the claim disfavours at "
                  "chance") + ": only a win can be read)"
    elif overtopped or sunk:
        shown += (" (only the arms the claim disfavours at the ceiling" if overtopped
                  else " (the arm the claim favours at chance") + ": only a loss the other way round can be read)"
    ok = capped or floored or overtopped or sunk or (not at_ceiling and not at_chance)
    return Precondition("headroom (no arm at the ceiling, each above chance by the margin)", shown, ok,
                        only_a_win=capped or floored, only_a_loss=overtopped or sunk)


def moved(changes: Mapping[str, Estimate], margin: float, unit: str = " points", who: str = "each arm",
          beside: Mapping[str, Estimate] | None = None) -> Precondition:
    """The treatment moved the model: the interval of each arm's change from its parent lies beyond ``±margin``
    (``beside``: changes shown, not required)."""
    def text(e: Estimate) -> str:
        return f"{e.value:+.3g} [{e.low:+.3g}, {e.high:+.3g}]{unit}"

    shown = ", ".join(f"{n} {text(e)}" for n, e in changes.items())
    if beside:
        shown += " (" + ", ".join(f"{n} {text(e)}" for n, e in beside.items()) + ")"
    return Precondition(f"{who} moved from its parent by more than {margin:g}{unit} (its interval)", shown,
                        bool(changes) and all(e.low > margin or e.high < -margin for e in changes.values()))


def reached(what: str, value: float, needed: float, unit: str = "", shown: str = "") -> Precondition:
    """The run reached the claim's regime (a rollout horizon, a context length, a number of training tokens, the
    attention layers a hybrid keeps); ``shown``: the measured value in words, when more than the number."""
    return Precondition(f"{what} ≥ {needed:g}{unit}", shown or f"{value:g}{unit}", bool(value >= needed))


def items(what: str, counts: Mapping[str, int], minimum: int) -> Precondition:
    """The claim's subset holds items to read: at least ``minimum`` in each named group (needles beyond a window per
    family, NIAH families the students never trained on)."""
    shown = ", ".join(f"{k} {v}" for k, v in counts.items()) or "none"
    return Precondition(f"{what} (≥ {minimum} each)", shown, bool(counts) and min(counts.values()) >= minimum)


def exact(what: str, method: str, exact_methods: Sequence[str]) -> Precondition:
    """The measurement is exact: ``method`` is one of ``exact_methods`` (an allocator's count of bytes, not a
    process's resident pages; an fp32 computation within tolerance of an fp64 loop)."""
    return Precondition(what, method, method in exact_methods)


def different(what: str, a: object, b: object, shown: str) -> Precondition:
    """Two conditions the claim compares are not the same (the layers two selections keep)."""
    return Precondition(what, shown, a != b)


def within(what: str, values: Mapping[str, float], low: float, high: float, fmt: str = ".2f") -> Precondition:
    """Every value lies in ``[low, high]`` (a per-patch probe at most 0.6: the category needs the whole image)."""
    shown = ", ".join(f"{k} {v:{fmt}}" if np.isfinite(v) else f"{k} –" for k, v in values.items()) or "no value"
    bounds = f"≤ {high:g}" if low == -np.inf else f"≥ {low:g}" if high == np.inf else f"in [{low:g}, {high:g}]"
    return Precondition(f"{what} ({bounds})", shown,
                        bool(values) and all(np.isfinite(v) and low <= v <= high for v in values.values()))
