"""The one judge of the claims papers declare as rows (:mod:`relin.config.claims`): it reads each arm's metric, builds
the row's preconditions with :mod:`.preconditions`' constructors, and draws the verdict with :mod:`.verdicts`' test.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any, Callable, Mapping, Sequence

from ..config import claims as rows
from ..config.report import PreconditionsConfig
from . import preconditions as pc
from . import verdicts as vd
from .lm_scores import ItemScores


@dataclass(frozen=True)
class Context:
    """What a paper's section gives the judge: the scores (an :class:`ItemScores` of language models, or a paper's own
    that measure its metrics: :class:`relin.report.lia_scores.LiaScores`), the teacher's eval name, how a chain row is
    named among the evaluations, the families each row's ``families`` names, the facts its texts and preconditions
    name, the exact figures it read from a stage's own file, by name (the metric ``figure``), and the item filters a
    row's ``over`` names (of an :class:`ItemScores`' columns)."""

    paper: str
    scores: ItemScores | Any
    teacher: str
    mastery: float
    name: Callable[[str], str]
    margins: Mapping[str, vd.Margin]
    pre: PreconditionsConfig
    families: Mapping[str, Sequence[str]]
    facts: Mapping[str, Any] = field(default_factory=dict)
    figures: Mapping[str, "Measured"] = field(default_factory=dict)
    items: Mapping[str, Callable] = field(default_factory=dict)

    def where(self, part: str) -> Callable | None:
        """The item filter ``part`` names (none: every item)."""
        return self.items[part] if part else None


@dataclass(frozen=True)
class Measured:
    """One arm's metric: its estimate (``None`` when nothing it reads was scored), its text, the families it was taken
    over (every family for a metric that reads none), its parts (an ``every`` test's, by name; the estimate is then
    the lowest), the facts it reports for the row's texts and preconditions, and the named estimates an ``all`` test's
    clauses and the preconditions read (``quantities``)."""

    estimate: vd.Estimate | None
    text: str
    used: tuple[str, ...] = ()
    parts: Mapping[str, vd.Estimate] = field(default_factory=dict)
    facts: Mapping[str, Any] = field(default_factory=dict)
    quantities: Mapping[str, vd.Estimate] = field(default_factory=dict)


def _recovery(ctx: Context, model: str, families: Sequence[str], part: str) -> Measured:
    rec = ctx.scores.recovery(model, ctx.teacher, families, ctx.mastery, ctx.where(part))
    return Measured(rec.estimate, rec.text(), rec.families)


def _perplexity_share(ctx: Context, model: str, families: Sequence[str], part: str) -> Measured:
    share = ctx.scores.perplexity_share(model, ctx.teacher)
    return Measured(share, share.text(".1f", unit="%"))


def _paper_measure(metric: str) -> Callable[[Context, str, Sequence[str], str], Measured]:
    """A metric the paper's scores measure themselves (``scores.measure(metric, arm, part)``)."""
    return lambda ctx, model, families, part: ctx.scores.measure(metric, model, part)


def _figure(ctx: Context, model: str, families: Sequence[str], part: str) -> Measured:
    return ctx.figures[part]


def _figure_read(ctx: Context, metric: str, model: str, part: str) -> bool:
    return part in ctx.figures


def _in_scores(ctx: Context, metric: str, model: str, part: str) -> bool:
    return model in ctx.scores


def _paper_scored(ctx: Context, metric: str, model: str, part: str) -> bool:
    return ctx.scores.scored(metric, model, part)


@dataclass(frozen=True)
class MetricSpec:
    """How the judge reads a metric: ``measure`` one arm, whether an arm is ``scored``, how a difference is written
    (``difference``, in points after ``scale``: 100 for a fraction), whether it rests on training seeds (``seeded``),
    for a fraction its ceiling 1 and the scores' chance (``fraction``), and whether its margin is in questions, which
    the scores turn into points of the part compared (``per_question``)."""

    measure: Callable[[Context, str, Sequence[str], str], Measured]
    scored: Callable[[Context, str, str, str], bool] = _paper_scored
    difference: str = "+.1f"
    scale: float = 1.0
    seeded: bool = True
    fraction: bool = False
    per_question: bool = False


METRICS = {"recovery": MetricSpec(_recovery, _in_scores), "perplexity_share": MetricSpec(_perplexity_share, _in_scores,
                                                                                          "+.2f"),
           "niah_accuracy": MetricSpec(_paper_measure("niah_accuracy"), scale=100.0, fraction=True),
           "mme_accuracy": MetricSpec(_paper_measure("mme_accuracy"), scale=100.0, fraction=True, per_question=True),
           "memory_exponent": MetricSpec(_paper_measure("memory_exponent"), seeded=False),
           "state_bound": MetricSpec(_paper_measure("state_bound"), seeded=False),
           "constant_input_growth": MetricSpec(_paper_measure("constant_input_growth"), seeded=False),
           "write_gate": MetricSpec(_paper_measure("write_gate"), seeded=False),
           "mixer": MetricSpec(_paper_measure("mixer"), seeded=False),
           "figure": MetricSpec(_figure, _figure_read, seeded=False)}


@dataclass(frozen=True)
class Arms:
    """The arms of one row as measured: per arm its evaluation's name, its label in the preconditions and its
    metric; the favoured one's index."""

    models: list[str]
    labels: list[str]
    measured: list[Measured]
    favoured: int

    @property
    def first(self) -> Measured:
        return self.measured[0]

    def by_model(self) -> dict[str, vd.Estimate]:
        return {m: a.estimate for m, a in zip(self.models, self.measured)}

    def by_label(self) -> dict[str, vd.Estimate]:
        return {n: a.estimate for n, a in zip(self.labels, self.measured)}


def _headroom(ctx: Context, row: rows.ClaimRow, arms: Arms, margin: vd.Margin) -> vd.Precondition:
    """Headroom on what the metric is made of: the arms' mean accuracy over the families used (ceiling 1, chance the
    families' highest), a fraction itself (ceiling 1, the scores' chance), or the perplexity share itself (ceiling
    100, chance 0)."""
    favoured = arms.labels[arms.favoured]
    spec = METRICS[row.metric]
    if row.metric == "recovery":
        used = arms.first.used
        accuracy = {m: vd.mean_of([ctx.scores.accuracy(m, f) for f in used]) for m in arms.models}
        return pc.headroom(accuracy, 1.0, max(ctx.scores.chance(f) for f in used), margin.value / 100, favoured)
    if spec.fraction:
        return pc.headroom(arms.by_label(), 1.0, ctx.scores.chance(row.metric), margin.value / spec.scale, favoured)
    return pc.headroom(arms.by_model(), 100.0, 0.0, margin.value, favoured)


def _precondition(ctx: Context, row: rows.ClaimRow, p: rows.Precondition, arms: Arms, families: Sequence[str],
                  margin: vd.Margin | None, facts: Mapping[str, Any]) -> vd.Precondition | None:
    """The precondition ``p`` as measured, or ``None`` where it does not apply: a precondition on the arms'
    measurements when the first arm has none, a parent that was not scored, a quantity the run did not measure."""
    first, spec = arms.first, METRICS[row.metric]
    if isinstance(p, rows.Competent) and not p.reference:
        over = (first.used or families) if p.over == "used" else families
        where = ctx.where(row.part_of(0)) if row.metric == "recovery" else None
        return pc.competent("the teacher", {f: ctx.scores.accuracy(ctx.teacher, f, where).value for f in over
                                            if ctx.scores.count(f, where)}, max(ctx.mastery, p.threshold),
                            tuple(facts[p.trained_on]) if p.trained_on else ())
    if isinstance(p, rows.Items):
        where = ctx.where(row.part_of(0))
        return pc.items(p.what.format(**facts), {f: ctx.scores.count(f, where) for f in families
                                                 if ctx.scores.count(f)}, 1)
    if isinstance(p, rows.Reached):
        needed = getattr(ctx.pre, p.needed) if isinstance(p.needed, str) else p.needed
        return pc.reached(p.what, facts[p.value], needed, p.unit, facts[p.shown] if p.shown else "")
    if isinstance(p, rows.Different):
        return pc.different(p.what, facts[p.a], facts[p.b], p.shown.format(**facts))
    if isinstance(p, rows.Exact):
        methods = facts[p.value]
        return pc.exact(p.what, ", ".join(methods) or "none", p.allowed if len(methods) == 1 else ())
    if isinstance(p, rows.Learned):
        model, over = ctx.name(p.arm), ctx.families[p.families] if p.families else families
        found = (spec.measure(ctx, model, over, p.over) if spec.scored(ctx, row.metric, model, p.over)
                 else Measured(None, ""))
        shown = p.shown.format(a=found.text, used=", ".join(found.used)) if p.shown else found.text
        return pc.learned(model, p.what.format(**facts), found.estimate,
                          getattr(ctx.pre, p.threshold) if p.threshold else ctx.mastery, shown)
    if first.estimate is None:
        return None
    if isinstance(p, rows.AboveChance):
        return _above_chance(ctx, row, p, arms, families, margin, facts)
    if isinstance(p, rows.Competent):
        return pc.competent(p.label, ctx.scores.competence(ctx.name(p.reference), row.metric, first.used),
                            p.threshold or ctx.mastery)
    if isinstance(p, rows.Bounded):
        values = ctx.scores.quantity(p.quantity, arms.models[0], first.used)
        return None if values is None else pc.within(p.what, values, p.low, p.high, p.fmt)
    if isinstance(p, rows.EnoughSeeds):
        return pc.enough_seeds(arms.by_model(), ctx.pre.min_seeds)
    if isinstance(p, rows.Headroom):
        return _headroom(ctx, row, arms, margin)
    if isinstance(p, rows.Moved):
        parent = ctx.name(p.parent)
        if parent not in ctx.scores:
            return None
        base = spec.measure(ctx, parent, families, "").estimate
        change = {m: a - base for m, a in arms.by_model().items()}
        favoured = arms.models[arms.favoured]
        return pc.moved({favoured: change[favoured]}, margin.value, who=p.who,
                        beside={m: c for m, c in change.items() if m != favoured})
    raise TypeError(f"claim {row.claim!r}: unknown precondition {p!r}")


def _measured(ctx: Context, metric: str, arm: str, families: Sequence[str], part: str) -> vd.Estimate | None:
    """The chain row ``arm``'s ``metric`` over ``part``; ``None`` when nothing it reads was scored."""
    spec, model = METRICS[metric], ctx.name(arm)
    return spec.measure(ctx, model, families, part).estimate if spec.scored(ctx, metric, model, part) else None


def _above_chance(ctx: Context, row: rows.ClaimRow, p: rows.AboveChance, arms: Arms, families: Sequence[str],
                  margin: vd.Margin | None, facts: Mapping[str, Any]) -> vd.Precondition | None:
    """``p`` as measured: one of the row's arms (or a named quantity of its metric), or a chain row on its metric."""
    metric = p.metric or row.metric
    spec = METRICS[metric]
    chance = ctx.scores.chance(metric) if p.chance is None else p.chance
    if isinstance(p.arm, int):
        found = arms.measured[p.arm]
        estimate = found.quantities[p.quantity] if p.quantity else found.estimate
    else:
        estimate = _measured(ctx, metric, p.arm, families, p.over)
        if estimate is None:
            return pc.above_chance(p.who.format(**facts), vd.Estimate.exact(chance), chance, 0.0) if p.required \
                else None
    if isinstance(p.margin, (int, float)):
        return pc.above_chance(p.who.format(**facts), estimate, chance, float(p.margin))
    if isinstance(p.margin, str):
        margin = ctx.margins[p.margin]
        if spec.per_question:
            margin = ctx.scores.margin(metric, p.over, margin)
    return pc.above_chance(p.who.format(**facts), estimate, chance, margin.value / spec.scale)


def _apart(ctx: Context, clause: rows.Apart, families: Sequence[str]) -> tuple[vd.Estimate, vd.Margin] | None:
    """An :class:`~relin.config.claims.Apart` clause's difference (in the metric's points) and margin; ``None`` while
    either row has nothing scored."""
    spec = METRICS[clause.metric]
    a, b = (_measured(ctx, clause.metric, arm, families, clause.over) for arm in clause.arms)
    if a is None or b is None:
        return None
    margin = ctx.margins[clause.margin]
    if spec.per_question:
        margin = ctx.scores.margin(clause.metric, clause.over, margin)
    return (a - b if spec.scale == 1.0 else (a - b) * spec.scale), margin


def _clause(clause: rows.Clause, first: Measured, compared: tuple[vd.Estimate, vd.Margin] | None,
            texts: Mapping[str, Any]) -> vd.Verdict:
    """One clause of an ``all`` test: holds (reproduced), fails (contradicted, with its reason) or neither."""
    if isinstance(clause, rows.Inside):
        estimate = first.quantities[clause.quantity]
        holds = clause.low <= estimate.low and estimate.high <= clause.high
        fails = estimate.high < clause.low or estimate.low > clause.high
    else:
        difference, margin = compared
        m = margin.value
        holds = difference.low > m or difference.high < -m
        fails = -m <= difference.low and difference.high <= m
    if holds:
        return vd.Verdict(vd.REPRODUCED)
    if fails:
        return vd.Verdict(vd.CONTRADICTED, clause.contradicted.format(**texts))
    return vd.inconclusive()


def _all(verdicts: Sequence[vd.Verdict]) -> vd.Verdict:
    """Every clause holds: reproduced; one fails: contradicted, naming each that fails; else inconclusive."""
    failed = [v.reason for v in verdicts if v.outcome == vd.CONTRADICTED]
    if failed:
        return vd.Verdict(vd.CONTRADICTED, "; ".join(failed))
    if all(v.outcome == vd.REPRODUCED for v in verdicts):
        return vd.Verdict(vd.REPRODUCED)
    return vd.inconclusive()


def _every(verdicts: Sequence[vd.Verdict], threshold: float, part: str) -> vd.Verdict:
    """Each part at least ``threshold`` (``verdicts``: each part's :func:`~.verdicts.at_least`): contradicted when some
    part's interval lies below it, reproduced when every part's lies above, else inconclusive."""
    if any(v.outcome == vd.CONTRADICTED for v in verdicts):
        return vd.Verdict(vd.CONTRADICTED, f"{sum(v.outcome == vd.CONTRADICTED for v in verdicts)} {part}s' intervals "
                                           f"lie below {threshold:g}")
    if all(v.outcome == vd.REPRODUCED for v in verdicts):
        return vd.Verdict(vd.REPRODUCED)
    return vd.inconclusive(f"some {part}s' intervals contain {threshold:g}")


def _decide(row: rows.ClaimRow, arms: Arms, margin: vd.Margin | None, facts: Mapping[str, Any],
            compared: Mapping[int, tuple[vd.Estimate, vd.Margin] | None]) -> tuple[str, Callable[[], vd.Verdict]]:
    """Our text and the row's test, on arms that were scored (``compared``: each Apart clause's difference, by
    index)."""
    spec, first = METRICS[row.metric], arms.first
    texts = dict(facts, a=first.text, used=", ".join(first.used))
    if row.test in ("beats", "within"):
        favoured, other = arms.measured[arms.favoured].estimate, arms.measured[1 - arms.favoured].estimate
        difference = favoured - other if spec.scale == 1.0 else (favoured - other) * spec.scale
        texts.update(b=arms.measured[1].text, difference=difference.text(spec.difference))
        if row.test == "beats":
            test = partial(vd.beats, difference, margin, tuple(n.format(**facts) for n in row.names))
        else:
            test = partial(vd.within, difference, margin or vd.Margin(row.threshold, ""))
    elif row.test == "every":
        threshold = facts["threshold"]
        verdicts = [vd.at_least(e, threshold) for e in first.parts.values()]
        texts.update(worst=first.text, worst_part=min(first.parts, key=lambda k: first.parts[k].value),
                     reached=sum(v.outcome == vd.REPRODUCED for v in verdicts), parts=len(verdicts),
                     below=", ".join(k for k, v in zip(first.parts, verdicts) if v.outcome == vd.CONTRADICTED))
        test = partial(_every, verdicts, threshold, row.part)
    elif row.test == "all":
        shown = {i: row.clauses[i].shown.format(difference=found[0].text(METRICS[row.clauses[i].metric].difference))
                 for i, found in compared.items() if found is not None}
        texts.update(compared="".join(shown.values()))
        def test() -> vd.Verdict:
            return _all([_clause(c, first, compared.get(i), texts) for i, c in enumerate(row.clauses)])
    else:
        test = partial(vd.at_least if row.test == "at_least" else vd.at_most, first.estimate, row.threshold)

    def decide() -> vd.Verdict:
        verdict = test()
        if row.contradicted and verdict.outcome == vd.CONTRADICTED:
            return vd.Verdict(vd.CONTRADICTED, row.contradicted.format(**texts))
        if row.inconclusive and verdict.outcome == vd.INCONCLUSIVE:
            return vd.inconclusive(row.inconclusive.format(**texts))
        return verdict

    return row.ours.format(**texts), decide


def judge(row: rows.ClaimRow, ctx: Context) -> vd.Claim | None:
    """The verdict of one row on this run; ``None`` when an arm was not scored or a fact it names is missing."""
    spec = METRICS[row.metric]
    models = [ctx.name(arm) for arm in row.arms]
    parts = [row.part_of(i) for i in range(len(models))]
    if not all(spec.scored(ctx, row.metric, m, part) for m, part in zip(models, parts)):
        return None
    families = ctx.families[row.families]
    measured = [spec.measure(ctx, m, families, part) for m, part in zip(models, parts)]
    facts = {**ctx.facts, **measured[0].facts}
    facts["threshold"] = row.threshold / facts[row.threshold_over] if row.threshold_over in facts else row.threshold
    unscored = measured[0].estimate is None and bool(row.unscored)
    if not row.facts(unscored) <= set(facts):
        return None
    arms = Arms(models, list(row.labels or models), measured, row.favoured)
    margin = ctx.margins[row.margin] if row.margin else None
    if margin is not None and spec.per_question:
        margin = ctx.scores.margin(row.metric, parts[0], margin)
    compared = {} if unscored else {i: _apart(ctx, c, families) for i, c in enumerate(row.clauses)
                                    if isinstance(c, rows.Apart)}
    pre = tuple(built for p in (row.unscored if unscored else row.preconditions)
                if (built := _precondition(ctx, row, p, arms, families, margin, facts)) is not None)
    if arms.first.estimate is not None:
        pre += tuple(pc.items(row.clauses[i].unscored, {}, 1) for i, found in compared.items() if found is None)
    claim, source = row.claim.format(**facts), row.source.format(**facts)
    if arms.first.estimate is None:
        verdict = vd.judged(pre, lambda: vd.Verdict(vd.NOT_TESTABLE, f"{models[0]}: nothing scored"))
        return vd.Claim(ctx.paper, claim, source, arms.first.text, verdict, pre, kind=row.kind, margin=margin)
    ours, decide = _decide(row, arms, margin, facts, compared)
    seeds = min(a.estimate.seeds for a in measured) if spec.seeded and row.seeded else None
    return vd.Claim(ctx.paper, claim, source, ours, vd.judged(pre, decide), pre, kind=row.kind, seeds=seeds,
                    margin=margin)


def judge_all(claims: rows.Claims, ctx: Context) -> list[vd.Claim]:
    """Every row shown on this run, in table order."""
    return [claim for row in claims if (claim := judge(row, ctx)) is not None]
