"""Per-item scores of the language models evaluated on one test split (``items.csv`` of ``relin eval-lm``),
resampled together: accuracy per family, perplexity and recovery as % of a teacher, each an
:class:`~relin.report.verdicts.Estimate` with its paired bootstrap interval.

Recovery is the papers' definition (OPAL Table 1: 10.6 / 49.0): a ratio of averages, the student's mean
accuracy over the families the teacher masters divided by the teacher's mean over the same families;
families where the teacher scores below the mastery threshold are excluded and listed with its score.
Perplexity "% of the teacher" is teacher / student × 100 on the same passages.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from ..artifacts import ITEM_COLUMNS
from ..errors import InputError
from ..eval.tasks import PERPLEXITY_TASKS
from ..names import REPLICA_NAME
from .inputs import EvalResult, read_csv_rows, split_name
from .verdicts import Estimate, Resampler, over_seeds

# A replica of a model trained with another seed: ``<name>-s<seed>``.
REPLICA = REPLICA_NAME


def first_replicas(names) -> list[str]:
    """``names`` without the replicas of another name (the models as the tables list them)."""
    return [n for n in names if not ((m := REPLICA.match(n)) and m["base"] in names)]


def replicas(names) -> dict[str, list[str]]:
    """``{base: [base, base-s<seed>, ...]}`` for every name with replicas among ``names``."""
    out: dict[str, list[str]] = {}
    for name in names:
        match = REPLICA.match(name)
        if match and match["base"] in names:
            out.setdefault(match["base"], [match["base"]]).append(name)
    return out


@dataclass(frozen=True)
class ModelItems:
    """One model's ``items.csv`` as columns; ``chance`` per family from its ``metrics.json``."""

    name: str
    columns: dict[str, np.ndarray]
    chance: dict[str, float]
    path: object

    @property
    def key(self) -> list[tuple]:
        return list(zip(self.columns["task"], self.columns["length"], self.columns["depth"]))


def read_items(spec: str, chance: dict[str, float] | None = None) -> ModelItems:
    """``[NAME=]items.csv`` (default name: its directory, ``results/eval/<name>/``)."""
    name, path = split_name(spec)
    rows = read_csv_rows(path, ITEM_COLUMNS, "an items.csv of relin eval-lm with columns " + ",".join(ITEM_COLUMNS))
    columns = {c: np.array([r[c] for r in rows], dtype=object if c == "task" else np.float64) for c in ITEM_COLUMNS}
    return ModelItems(name=name or path.parent.name, columns=columns, chance=dict(chance or {}), path=path)


def attach_chance(items: list[ModelItems], evals: list[EvalResult]) -> list[ModelItems]:
    """Each model's items with the chance levels its ``metrics.json`` declares."""
    chance = {e.name: e.metrics.get("chance", {}) for e in evals}
    return [ModelItems(i.name, i.columns, chance.get(i.name, {}), i.path) for i in items]


@dataclass(frozen=True)
class Recovery:
    """A student's recovery of a teacher (in %) over ``families``; ``excluded`` maps each family the teacher
    does not master to its score. ``estimate`` is ``None`` when no family is mastered."""

    estimate: Estimate | None
    families: tuple[str, ...]
    excluded: dict[str, float] = field(default_factory=dict)

    def text(self) -> str:
        return "–" if self.estimate is None else self.estimate.text(".0f", unit="%")


class ItemScores:
    """Models scored on the same items, resampled with one stratified :class:`Resampler` (strata: family).

    Raises :class:`InputError` naming a file whose items differ from the first model's (another test split).
    """

    def __init__(self, models: Sequence[ModelItems], resamples: int, seed: int = 0):
        if not models:
            raise ValueError("no models to score")
        self.models = {m.name: m for m in models}
        first = models[0]
        for other in models[1:]:
            if other.key != first.key:
                raise InputError(f"{other.path}: its items differ from those of {first.path} (expected every model "
                                 f"of a report group evaluated on the same test split)")
        self.task = first.columns["task"]
        self.resampler = Resampler(list(self.task), resamples=resamples, seed=seed)
        self.replicas = replicas(self.models)

    def __contains__(self, name: str) -> bool:
        return name in self.models

    def _over_seeds(self, name: str, estimate: Callable[[str], Estimate]) -> Estimate:
        names = self.replicas.get(name, [name])
        return over_seeds([estimate(n) for n in names])

    def families(self) -> list[str]:
        return [t for t in dict.fromkeys(self.task) if t not in PERPLEXITY_TASKS]

    def mask(self, family: str | Sequence[str], where: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None,
             ) -> np.ndarray:
        families = [family] if isinstance(family, str) else list(family)
        keep = np.isin(self.task, families)
        if where is not None:
            keep &= where(next(iter(self.models.values())).columns)
        return keep

    def accuracy(self, name: str, family: str, where=None) -> Estimate:
        """Pooled accuracy (hits / total) of ``family``'s items that ``where`` keeps (the mean over the model's
        training replicas, when it has several)."""
        mask = self.mask(family, where)

        def one(model: str) -> Estimate:
            cols = self.models[model].columns
            return self.resampler.ratio(cols["hits"], cols["total"], mask)

        return self._over_seeds(name, one)

    def count(self, family: str, where=None) -> int:
        return int(self.mask(family, where).sum())

    def chance(self, family: str) -> float:
        return max((m.chance.get(family, 0.0) for m in self.models.values()), default=0.0)

    def perplexity(self, name: str) -> Estimate:
        def one(model: str) -> Estimate:
            cols = self.models[model].columns
            return self.resampler.ratio(cols["nll"], cols["tokens"], np.isin(self.task, PERPLEXITY_TASKS)).map(np.exp)

        return self._over_seeds(name, one)

    def perplexity_share(self, student: str, teacher: str) -> Estimate:
        """Teacher / student perplexity × 100 on the same passages (100 = the teacher's; lower is worse)."""
        return self.perplexity(teacher) / self.perplexity(student) * 100.0

    def recovery(self, student: str, teacher: str, families: Sequence[str], mastery: float,
                 where=None) -> Recovery:
        """Ratio of averages over the families in ``families`` the teacher masters (score >= ``mastery`` on
        the items ``where`` keeps), in %; families without such items are skipped."""
        present = [f for f in families if self.count(f, where)]
        teacher_acc = {f: self.accuracy(teacher, f, where) for f in present}
        kept = tuple(f for f in present if teacher_acc[f].value >= mastery)
        excluded = {f: teacher_acc[f].value for f in present if f not in kept}
        if not kept:
            return Recovery(None, (), excluded)
        student_sum = sum((self.accuracy(student, f, where) for f in kept[1:]), self.accuracy(student, kept[0], where))
        teacher_sum = sum((teacher_acc[f] for f in kept[1:]), teacher_acc[kept[0]])
        return Recovery(student_sum / teacher_sum * 100.0, kept, excluded)


def excluded_note(recovery: Recovery, mastery: float) -> str:
    if not recovery.excluded:
        return ""
    listed = ", ".join(f"{f} ({score:.2f})" for f, score in recovery.excluded.items())
    return f" Excluded from recovery, the teacher below {mastery:g}: {listed}."
