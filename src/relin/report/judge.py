"""The one judge of the claims papers declare as rows (:mod:`relin.config.claims`): it reads each arm's metric, builds
the row's preconditions with :mod:`.preconditions`' constructors, and draws the verdict with :mod:`.verdicts`' test.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..config import claims as rows
from ..config.report import PreconditionsConfig
from . import preconditions as pc
from . import verdicts as vd
from .lm_scores import ItemScores


@dataclass(frozen=True)
class Context:
    """What a paper's section gives the judge: the scores, the teacher's eval name, how a chain row is named among
    the evaluations, the families each row's ``families`` names, and the facts its texts and preconditions name."""

    paper: str
    scores: ItemScores
    teacher: str
    mastery: float
    name: Callable[[str], str]
    margins: Mapping[str, vd.Margin]
    pre: PreconditionsConfig
    families: Mapping[str, Sequence[str]]
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Measured:
    """One arm's metric: its estimate (``None`` when nothing it reads was scored), its text, and the families it
    was taken over (every family for a metric that reads none)."""

    estimate: vd.Estimate | None
    text: str
    used: tuple[str, ...] = ()


def _recovery(ctx: Context, model: str, families: Sequence[str]) -> Measured:
    rec = ctx.scores.recovery(model, ctx.teacher, families, ctx.mastery)
    return Measured(rec.estimate, rec.text(), rec.families)


def _perplexity_share(ctx: Context, model: str, families: Sequence[str]) -> Measured:
    share = ctx.scores.perplexity_share(model, ctx.teacher)
    return Measured(share, share.text(".1f", unit="%"))


# Per metric: how an arm is measured, and how a difference of two arms is written.
METRICS = {"recovery": (_recovery, "+.1f"), "perplexity_share": (_perplexity_share, "+.2f")}


def _headroom(ctx: Context, row: rows.ClaimRow, arms: Mapping[str, Measured], used: Sequence[str],
              margin: vd.Margin) -> vd.Precondition:
    """Headroom on what the metric is made of: the arms' mean accuracy over the families used (ceiling 1, chance the
    families' highest), or the perplexity share itself (ceiling 100, chance 0)."""
    favoured = ctx.name(row.arms[0])
    if row.metric == "recovery":
        accuracy = {m: vd.mean_of([ctx.scores.accuracy(m, f) for f in used]) for m in arms}
        return pc.headroom(accuracy, 1.0, max(ctx.scores.chance(f) for f in used), margin.value / 100, favoured)
    return pc.headroom({m: a.estimate for m, a in arms.items()}, 100.0, 0.0, margin.value, favoured)


def _precondition(ctx: Context, row: rows.ClaimRow, p: rows.Precondition, arms: dict[str, Measured],
                  families: Sequence[str], margin: vd.Margin | None, facts: Mapping[str, Any]
                  ) -> vd.Precondition | None:
    """The precondition ``p`` as measured, or ``None`` where it does not apply: a precondition on the arms'
    estimates when the first arm has none, a parent that was not scored."""
    first = arms[ctx.name(row.arms[0])]
    if isinstance(p, rows.Competent):
        over = (first.used or families) if p.over == "used" else families
        return pc.competent("the teacher", {f: ctx.scores.accuracy(ctx.teacher, f).value for f in over
                                            if ctx.scores.count(f)}, max(ctx.mastery, p.threshold))
    if isinstance(p, rows.Reached):
        return pc.reached(p.what, facts[p.value], getattr(ctx.pre, p.needed), p.unit)
    if isinstance(p, rows.Different):
        return pc.different(p.what, facts[p.a], facts[p.b], p.shown.format(**facts))
    if first.estimate is None:
        return None
    if isinstance(p, rows.EnoughSeeds):
        return pc.enough_seeds({m: a.estimate for m, a in arms.items()}, ctx.pre.min_seeds)
    if isinstance(p, rows.Headroom):
        return _headroom(ctx, row, arms, first.used, margin)
    if isinstance(p, rows.Moved):
        parent = ctx.name(p.parent)
        if parent not in ctx.scores:
            return None
        measure = METRICS[row.metric][0]
        base = measure(ctx, parent, families).estimate
        change = {m: a.estimate - base for m, a in arms.items()}
        favoured = ctx.name(row.arms[0])
        return pc.moved({favoured: change[favoured]}, margin.value, who=p.who,
                        beside={m: c for m, c in change.items() if m != favoured})
    raise TypeError(f"claim {row.claim!r}: unknown precondition {p!r}")


def judge(row: rows.ClaimRow, ctx: Context) -> vd.Claim | None:
    """The verdict of one row on this run; ``None`` when an arm was not scored or a fact it names is missing."""
    models = [ctx.name(arm) for arm in row.arms]
    if any(m not in ctx.scores for m in models) or not row.facts() <= set(ctx.facts):
        return None
    facts = {**ctx.facts, "threshold": row.threshold}
    families = ctx.families[row.families]
    measure, difference_spec = METRICS[row.metric]
    arms = {m: measure(ctx, m, families) for m in models}
    first = arms[models[0]]
    margin = ctx.margins[row.margin] if row.margin else None
    pre = tuple(built for p in row.preconditions
                if (built := _precondition(ctx, row, p, arms, families, margin, facts)) is not None)
    claim, source = row.claim.format(**facts), row.source.format(**facts)
    if first.estimate is None:
        verdict = vd.judged(pre, lambda: vd.Verdict(vd.NOT_TESTABLE, f"{models[0]}: nothing scored"))
        return vd.Claim(ctx.paper, claim, source, "–", verdict, pre, kind=row.kind, margin=margin)
    if row.test == "beats":
        difference = first.estimate - arms[models[1]].estimate
        ours = row.ours.format(**facts, a=first.text, b=arms[models[1]].text, used=", ".join(first.used),
                               difference=difference.text(difference_spec))
        names = tuple(n.format(**facts) for n in row.names)
        verdict = vd.judged(pre, lambda: vd.beats(difference, margin, names))
    else:
        ours = row.ours.format(**facts, a=first.text, used=", ".join(first.used))
        test = vd.at_least if row.test == "at_least" else vd.at_most
        verdict = vd.judged(pre, lambda: test(first.estimate, row.threshold))
    seeds = min(a.estimate.seeds for a in arms.values())
    return vd.Claim(ctx.paper, claim, source, ours, verdict, pre, kind=row.kind, seeds=seeds, margin=margin)


def judge_all(claims: rows.Claims, ctx: Context) -> list[vd.Claim]:
    """Every row shown on this run, in table order."""
    return [claim for row in claims if (claim := judge(row, ctx)) is not None]
