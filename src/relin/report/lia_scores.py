"""What LIA-MTR's claim rows (:data:`relin.config.lia_mtr.CLAIMS`) measure, for the one judge (:mod:`.judge`): each
metric of a bridge over a part of its experiment, with its interval, and the quantities its preconditions read.

Intervals: MME over images (stratified by subtask; a pair's two answers stay together, as acc+ needs), the bridge NIAH
over test sequences (stratified by cell; the depths of a length share their sequences and their draws), the memory
exponent from its least-squares fit (t distribution, n - 2 degrees of freedom), the write gate and the mixer's weights
over evaluation images (the probe's per-image means); Theorem 2's ratio, Lemma 2's exponents and the gate's token-wise
spread are exact (no sampling noise).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..config.lia_mtr import BRIDGES, MEMORY_MIN_N
from ..data.vision.synth import CATEGORIES
from ..eval.mme import ScoredAnswer
from . import paper_figures as pf
from . import verdicts as vd
from .judge import Measured
from .lm_scores import first_replicas, replicas

TEXT = "text_reference"
MME_CHANCE = 0.5
# Theorem 2: the paper's slowest half-life (steps), when a bridge's NIAH metrics do not give its own.
SLOWEST_HALF_LIFE = pf.LIA_HALF_LIVES.number(3)


class MMEScores:
    """Every model's answers to the same MME-style images, resampled by image (stratified by subtask): per model and
    phase the right answers of each image's pair, as ``lia-mtr-eval-mme`` scored them (its ``items.csv``)."""

    def __init__(self, answers: dict[str, dict[str, dict[str, list[ScoredAnswer]]]], resamples: int):
        self.cells: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        images = None
        for model, phases in answers.items():
            for phase, tasks in phases.items():
                pairs = [tasks[t][i:i + 2] for t in CATEGORIES for i in range(0, len(tasks.get(t, [])), 2)]
                key = [(t, a.image) for t in CATEGORIES for a in tasks.get(t, [])[::2]]
                if images is None:
                    images = key
                if key != images:
                    continue
                right = np.array([[a.correct for a in pair] for pair in pairs], dtype=float)
                yes = np.array([[a.answer == "yes" for a in pair] for pair in pairs], dtype=float)
                self.cells[(model, phase)] = {"correct": right.sum(1), "both": right.prod(1), "yes": yes.sum(1)}
        self.task = np.array([t for t, _ in images or []])
        self.resampler = vd.Resampler(list(self.task), resamples=resamples)
        self.replicas = replicas(list(answers))

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self.cells

    def _over_seeds(self, model: str, phase: str, estimate) -> vd.Estimate:
        names = [n for n in self.replicas.get(model, [model]) if (n, phase) in self.cells]
        return vd.over_seeds([estimate(self.cells[(n, phase)]) for n in names])

    def questions(self, task: str | None = None) -> int:
        """Questions of a category (two per image), or of the whole set."""
        return 2 * int(len(self.task) if task is None else (self.task == task).sum())

    def accuracy(self, model: str, phase: str, task: str | None = None) -> vd.Estimate:
        where = None if task is None else self.task == task
        pairs = np.full(len(self.task), 2.0)
        return self._over_seeds(model, phase, lambda cells: self.resampler.ratio(cells["correct"], pairs, where))

    def acc_plus(self, model: str, phase: str) -> vd.Estimate:
        return self._over_seeds(model, phase, lambda cells: self.resampler.mean(cells["both"]))

    def yes_share(self, model: str, phase: str) -> float:
        return float(self.cells[(model, phase)]["yes"].sum() / (2 * len(self.task)))


def probe_accuracy(patch_probe: dict | None, task: str) -> vd.Estimate | None:
    """The per-patch probe's test accuracy on ``task`` with its Wilson interval (right/wrong test questions)."""
    found = (patch_probe or {}).get("tasks", {}).get(task)
    if not found:
        return None
    n, hits = found["test_questions"], found["correct"]
    return vd.Estimate(hits / n, np.empty(0), bounds=vd.wilson(hits, n), support=(0.0, 1.0))


def beyond_training(data: dict, bridge: str = "lia_mtr") -> int:
    """The longest trained length of the NIAH bridges (depth profiles read the lengths past it)."""
    metrics = data["niah_metrics"].get(bridge) or next(iter(data["niah_metrics"].values()), {})
    return max(metrics.get("trained_lengths") or [0])


def norm_growth(state: dict) -> float:
    """The exponent p of the state's norm ∝ N^p between the two longest lengths (0: bounded, 1: linear)."""
    lengths = sorted(int(n) for n in state)
    if len(lengths) < 2:
        return float("nan")
    (a, b), (na, nb) = lengths[-2:], (state[str(n)]["norm"] for n in lengths[-2:])
    return math.log(max(nb, 1e-30) / max(na, 1e-30)) / math.log(b / a)


def exponent(rows: list[dict], resamples: int, seed: int = 0) -> vd.Estimate | None:
    """Least-squares slope of log peak on log N over the sizes from ``MEMORY_MIN_N`` (the asymptote: below it a fixed
    workspace weighs in), with draws from its t distribution (n - 2 d.o.f.)."""
    points = [(math.log(r["n"]), math.log(r["peak_bytes"])) for r in rows
              if r["status"] == "ok" and r["peak_bytes"] and r["n"] >= MEMORY_MIN_N]
    if len(points) < 3:
        return None
    x, y = np.array(points).T
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    se = math.sqrt((residual ** 2).sum() / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    draws = slope + se * np.random.default_rng(seed).standard_t(len(x) - 2, resamples)
    return vd.Estimate(float(slope), draws)


class LiaScores:
    """LIA-MTR's stage outputs (:func:`relin.report.lia_mtr.read_inputs`) as the judge reads them: ``scored`` and
    ``measure`` per metric of :data:`relin.config.claims.Metric`, ``chance``, ``margin`` (a margin in questions as
    points of the part compared), ``competence`` (a reference's scores on what a claim used) and ``quantity`` (the
    values a :class:`~relin.config.claims.Bounded` precondition reads)."""

    def __init__(self, data: dict, mme: MMEScores | None, resamples: int):
        self.data, self.mme, self.resamples = data, mme, resamples
        self.niah = self._niah(data["niah_items"])
        self.chances = {"niah_accuracy": next(iter(data["niah_metrics"].values()), {}).get("chance", 0.0),
                        "mme_accuracy": MME_CHANCE}

    def _niah(self, items: dict[str, list[dict]]):
        if not items:
            return None
        cells = [(r["length"], r["depth"]) for r in next(iter(items.values()))]
        correct = {b: np.array([r["correct"] for r in rows], float) for b, rows in items.items()
                   if [(r["length"], r["depth"]) for r in rows] == cells}
        # every depth of a length holds the same test sequences, the needle moved (relin.eval.bridge_niah): paired
        resampler = vd.Resampler(cells, resamples=self.resamples, paired=lambda cell: cell[0])
        past = beyond_training(self.data)
        return {"resampler": resampler, "correct": correct, "groups": replicas(list(correct)),
                "cells": list(dict.fromkeys(resampler.strata)), "past": past,
                "depths": sorted({c[1] for c in resampler.strata}), "trained": resampler.mask(lambda c: c[0] <= past)}

    def facts(self) -> dict[str, Any]:
        """What the rows' texts name beyond one arm's metric."""
        niah = self.niah or {}
        depths = niah.get("depths") or [0.0]
        return {"trained": beyond_training(self.data),
                "depths_compared": f"depth {depths[0]:g} vs {depths[-1]:g}, lengths > {niah.get('past', 0)}",
                "largest_n": max((r["n"] for r in self.data["memory"]), default=0),
                "table1_bridges": 0 if self.mme is None else len(first_replicas(list(dict.fromkeys(
                    m for m, _ in self.mme.cells if m != TEXT))))}

    # NIAH: a bridge's accuracy, the mean over its training replicas, over the cells a part keeps.
    def _niah_mean(self, bridge: str, where=None) -> vd.Estimate:
        niah = self.niah
        return vd.over_seeds([niah["resampler"].mean(niah["correct"][n], where)
                              for n in niah["groups"].get(bridge, [bridge])])

    def _niah_where(self, part: str):
        niah, resampler = self.niah, self.niah["resampler"]
        if part == "trained":
            return niah["trained"] if niah["trained"].any() else None
        if part in ("earliest", "latest"):
            depth = niah["depths"][0 if part == "earliest" else -1]
            return resampler.mask(lambda c: c[1] == depth and c[0] > niah["past"])
        return np.ones(resampler.n, bool)

    def _niah_scored(self, bridge: str, part: str) -> bool:
        niah = self.niah
        if niah is None or bridge not in niah["correct"]:
            return False
        if part in ("earliest", "latest"):
            return len(niah["depths"]) >= 2 and bool(niah["resampler"].mask(lambda c: c[0] > niah["past"]).any())
        return True

    def _niah_measure(self, bridge: str, part: str) -> Measured:
        if part == "cells":
            resampler = self.niah["resampler"]
            per_cell = {f"length {c[0]}, depth {c[1]:g}": self._niah_mean(bridge, resampler.mask(lambda s, c=c: s == c))
                        for c in self.niah["cells"]}
            worst = min(per_cell.values(), key=lambda e: e.value)
            return Measured(worst, worst.text(".2f"), parts=per_cell)
        where = self._niah_where(part)
        if where is None:
            return Measured(None, "")
        estimate = self._niah_mean(bridge, where)
        return Measured(estimate, estimate.text(".2f"))

    # MME: a bridge's accuracy after a phase, on a category or overall ("<phase>/<category>" or "<phase>").
    def _mme_measure(self, bridge: str, part: str) -> Measured:
        if self.mme is None:
            return Measured(None, "not run")
        phase, _, category = part.partition("/")
        estimate = self.mme.accuracy(bridge, phase, category or None)
        return Measured(estimate, estimate.text(".1f", 100, "%"), (category,) if category else CATEGORIES)

    def _memory(self, bridge: str, impl: str) -> list[dict]:
        return [r for r in self.data["memory"] if r["bridge"] == bridge and r["impl"] == impl]

    def _memory_measure(self, bridge: str, impl: str) -> Measured:
        mine = self._memory(bridge, impl)
        estimate = exponent(mine, self.resamples)
        facts = {"reach": max((r["n"] for r in mine if r["status"] == "ok" and r["peak_bytes"]), default=0),
                 "methods": sorted({r.get("method") or "rss" for r in mine if r["status"] == "ok"}),
                 "sizes": sum(1 for r in mine if r["status"] == "ok" and r["peak_bytes"] and r["n"] >= MEMORY_MIN_N)}
        return Measured(estimate, estimate.text(".2f") if estimate else "–", facts=facts)

    def _state(self, bridge: str) -> dict:
        if bridge not in first_replicas(list(self.data["niah_metrics"])):
            return {}
        state = self.data["niah_metrics"][bridge].get("state") or {}
        return state if "bound_ratio" in next(iter(state.values()), {}) else {}

    def _state_measure(self, bridge: str) -> Measured:
        state = self._state(bridge)
        lengths = sorted(int(n) for n in state)
        ratio = max(state[str(n)]["bound_ratio"] for n in lengths)
        slowest = self.data["niah_metrics"][bridge].get("retention", {}).get("slowest_decay")
        life = math.log(0.5) / math.log(slowest) if slowest and slowest < 1 else SLOWEST_HALF_LIFE
        return Measured(vd.Estimate.exact(ratio), f"{ratio:.3f}", facts={
            "longest": lengths[-1], "growth": f"{norm_growth(state):.2f}", "half_lives": round(lengths[-1] / life, 1)})

    # The probe (relin lia-mtr-bridge-probe) on the trained bridges after phase 2, read only when it ran; while Table
    # I's chain did not run, its claims show that (the rows' unscored preconditions).
    def _probe(self, bridge: str) -> dict | None:
        probe = self.data.get("probe")
        if not probe or "gate_per_image" not in probe:
            return None
        return (probe.get("bridges") or {}).get(bridge) or (probe if bridge == "lia_mtr" else None)

    def _probe_scored(self, bridge: str, key: str) -> bool:
        probe = self.data.get("probe")
        if not probe or "gate_per_image" not in probe:
            return self.mme is None
        return key in (self._probe(bridge) or {})

    def _gate_measure(self, bridge: str) -> Measured:
        found = self._probe(bridge)
        if found is None:
            return Measured(None, "not run")
        gates = np.array(found["gate_per_image"])
        mean = vd.Resampler(["image"] * len(gates)).mean(gates)
        return Measured(mean, mean.text(".3f"), facts={"std": found["gate_std"]},
                        quantities={"mean": mean, "std": vd.Estimate.exact(found["gate_std"])})

    def _mixer_measure(self, bridge: str) -> Measured:
        found = self._probe(bridge)
        if found is None:
            return Measured(None, "not run")
        weights = np.array(found["mixer_per_image"])                     # [images, S]
        scales, lives = weights.shape[1], found["half_lives"]
        resampler = vd.Resampler(["image"] * len(weights))
        per_scale = [resampler.mean(weights[:, i]) for i in range(scales)]
        move = max((resampler.mean(np.abs(weights[:, i] - 1 / scales)) for i in range(scales)), key=lambda e: e.value)
        text = " / ".join(e.text(".3f") for e in per_scale) + " (t½ " + " / ".join(f"{x:g}" for x in lives) + ")"
        return Measured(min(per_scale, key=lambda e: e.value), text,
                        parts={f"t½ {life:g}": e for life, e in zip(lives, per_scale)}, facts={"scales": scales},
                        quantities={"move": move})

    def _lemma2(self) -> dict:
        found = self.data["memory_metrics"].get("lemma2") or {}
        return found if "constant_input_growth" in found else {}

    def _lemma2_state(self, bridge: str) -> str:
        return BRIDGES[bridge].variant.get("state", "diagonal")

    def _growth_measure(self, bridge: str) -> Measured:
        """Lemma 2's growth exponent of the output on a constant input: the linear-attention baseline's, or a LIA-MTR
        bridge's reduced to S = 1, λ = 1, no gate, with how far its state spans the un-normalised form."""
        found = self._lemma2()
        growth = found["constant_input_growth"]
        if bridge == "linear_attn":
            return Measured(vd.Estimate.exact(growth["linear_attention"]), f"{growth['linear_attention']:.2f}")
        state, dims = self._lemma2_state(bridge), found["map_dimensions"]
        error = found["head_matrix_error" if state == "head_matrix" else "expanded_diagonal_error"]
        span = (f"equals the un-normalised form exactly (relative error {error:.1e})" if state == "head_matrix"
                else f"at width {dims['width']} spans {dims['diagonal']} of the un-normalised form's "
                     f"{dims['linear_attention']} dimensions of maps, equal only at {dims['keys_x_values']} channels "
                     f"(relative error {error:.1e})")
        return Measured(vd.Estimate.exact(growth[state]), f"{growth[state]:.2f}", facts={"span": span})

    def scored(self, metric: str, bridge: str, part: str) -> bool:
        if metric == "niah_accuracy":
            return self._niah_scored(bridge, part)
        if metric == "mme_accuracy":
            return self.mme is None or (bridge, part.partition("/")[0]) in self.mme
        if metric == "memory_exponent":
            return bool(self._memory(bridge, part))
        if metric == "state_bound":
            return bool(self._state(bridge))
        if metric == "constant_input_growth":
            return bool(self._lemma2()) and (bridge == "linear_attn" or BRIDGES[bridge].mixer == "mtr")
        if metric in ("write_gate", "mixer"):
            return self._probe_scored(bridge, "gate_per_image" if metric == "write_gate" else "mixer_per_image")
        raise KeyError(f"LIA-MTR measures no metric {metric!r}")

    def measure(self, metric: str, bridge: str, part: str) -> Measured:
        if metric == "niah_accuracy":
            return self._niah_measure(bridge, part)
        if metric == "mme_accuracy":
            return self._mme_measure(bridge, part)
        if metric == "memory_exponent":
            return self._memory_measure(bridge, part)
        if metric == "state_bound":
            return self._state_measure(bridge)
        if metric == "constant_input_growth":
            return self._growth_measure(bridge)
        if metric == "write_gate":
            return self._gate_measure(bridge)
        if metric == "mixer":
            return self._mixer_measure(bridge)
        raise KeyError(f"LIA-MTR measures no metric {metric!r}")

    def chance(self, metric: str) -> float:
        return self.chances[metric]

    def margin(self, metric: str, part: str, margin: vd.Margin) -> vd.Margin | None:
        """An MME margin is in questions: as points of the category compared (none when MME did not run)."""
        if metric != "mme_accuracy":
            return margin
        if self.mme is None:
            return None
        category = part.partition("/")[2] or None
        return vd.Margin(100 * margin.value / max(self.mme.questions(category), 1), margin.reason)

    def competence(self, reference: str, metric: str, used: Sequence[str]) -> Mapping[str, float]:
        """The reference's scores on what a claim used: the caption reference per MME category, MHA's worst NIAH
        cell (none scored: empty)."""
        if metric == "mme_accuracy":
            return ({c: self.mme.accuracy(reference, "text", c).value for c in used}
                    if self.mme is not None and (reference, "text") in self.mme else {})
        if self.niah is None or reference not in self.niah["correct"]:
            return {}
        per_cell = self._niah_measure(reference, "cells").parts
        worst = min(per_cell, key=lambda c: per_cell[c].value)
        return {f"worst cell ({worst})": per_cell[worst].value}

    def quantity(self, quantity: str, bridge: str, used: Sequence[str]) -> Mapping[str, float] | None:
        """``patch_probe``: the per-patch probe on pixels per category used (none without a probe: MME's own images
        have no drawn rule); ``lemma2_error``: the reduced bridge's relative error against eqs. 3-5 in fp64."""
        if quantity == "patch_probe":
            probe = self.data["patch_probe"]
            if not probe:
                return None
            found = {c: probe_accuracy(probe, c) for c in used}
            return {c: e.value if e is not None else math.nan for c, e in found.items()}
        if quantity == "lemma2_error":
            found, state = self._lemma2(), self._lemma2_state(bridge)
            return {state: found["head_matrix_error" if state == "head_matrix" else "expanded_diagonal_error"]}
        raise KeyError(f"LIA-MTR measures no quantity {quantity!r}")
