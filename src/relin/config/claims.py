"""A paper's claims as one table beside its models' (:mod:`.chain`): per claim its text and the seed figure it
quotes, its kind, the chain rows it compares, the metric, the test, the margin and the preconditions, all as data.

One judge (:func:`relin.report.judge.judge`) turns any row into a verdict; the paper's report section supplies only
what the rows name but cannot compute from the scores alone (``facts``: a rollout horizon, the layers a selection
keeps, a figure quoted from the seed). Adding a claim, or a precondition to a claim, is one row.

Texts are ``str.format`` templates: ``claim`` and ``source`` may name ``threshold`` and the section's facts;
``ours`` also names ``a`` and ``b`` (each arm's metric with its interval), ``difference`` (``a - b``) and ``used``
(the families the metric was taken over). A row whose arms are not all scored, or whose texts or preconditions name
a fact the section did not supply, is not shown.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Literal, Sequence, Union

from .chain import Chain

Kind = Literal["claim", "check", "beyond"]
# at_least / at_most: the first arm's metric against ``threshold``; beats: the first arm's minus the second's against
# the claim's margin (paired items, seeds paired by index).
Test = Literal["at_least", "at_most", "beats"]
# recovery: a ratio of averages over the families the teacher masters, in %; perplexity_share: teacher / student
# perplexity on the same passages, in %.
Metric = Literal["recovery", "perplexity_share"]
ARMS = {"at_least": 1, "at_most": 1, "beats": 2}


@dataclass(frozen=True)
class Competent:
    """The teacher scores at least the mastery (or ``threshold``, if higher) on each family the claim reads:
    :func:`relin.report.preconditions.competent`. ``over``: the families the metric kept (``used``; all of
    ``families`` when it kept none), or every family of ``families`` that has items (``all``)."""

    threshold: float = 0.0
    over: Literal["used", "all"] = "used"


@dataclass(frozen=True)
class Moved:
    """The first arm moved from ``parent`` (a chain row) by more than the margin; the second's change is shown
    beside it: :func:`relin.report.preconditions.moved`. Not required when ``parent`` is not scored."""

    parent: str
    who: str = "each arm"


@dataclass(frozen=True)
class EnoughSeeds:
    """Every arm rests on ``report.preconditions.min_seeds`` training seeds: :func:`~relin.report.preconditions.
    enough_seeds`."""


@dataclass(frozen=True)
class Headroom:
    """The metric can show the margin, the first arm favoured: :func:`relin.report.preconditions.headroom`."""


@dataclass(frozen=True)
class Reached:
    """The run reached the claim's regime: the fact ``value`` is at least ``report.preconditions.<needed>``
    (:func:`relin.report.preconditions.reached`)."""

    what: str
    value: str
    needed: str
    unit: str = ""


@dataclass(frozen=True)
class Different:
    """The two conditions the claim compares differ: facts ``a`` and ``b`` (``shown`` a template over the facts):
    :func:`relin.report.preconditions.different`."""

    what: str
    a: str
    b: str
    shown: str


Precondition = Union[Competent, Moved, EnoughSeeds, Headroom, Reached, Different]


@dataclass(frozen=True)
class ClaimRow:
    """One claim of a paper's table."""

    claim: str
    """The claim in words (a template: ``threshold`` and facts)."""
    source: str
    """The seed's figure it quotes and where (a template over the facts)."""
    arms: tuple[str, ...]
    """The chain rows it reads: one for ``at_least``/``at_most``, the favoured then the other for ``beats``."""
    metric: Metric
    test: Test
    kind: Kind = "claim"
    margin: str = ""
    """``beats``: the key of ``report.margins`` (fixed before the run, with its reason)."""
    threshold: float = 0.0
    """``at_least``/``at_most``: the bound, in the metric's unit."""
    families: str = "all"
    """The task families the metric reads, by a name the paper's section resolves (``all``: every scored one)."""
    preconditions: tuple[Precondition, ...] = ()
    ours: str = "{a} vs {b}; difference {difference} points"
    names: tuple[str, str] = ("A", "B")
    """How a ``beats`` verdict names the two sides (templates over the facts)."""

    def templates(self) -> list[str]:
        texts = [self.claim, self.source, self.ours, *self.names]
        texts += [p.shown for p in self.preconditions if isinstance(p, Different)]
        return texts

    def facts(self) -> set[str]:
        """The facts the row names: in its texts, and as the values its preconditions compare."""
        own = {"a", "b", "difference", "used", "threshold"}
        named = {field.split(".")[0].split("[")[0] for text in self.templates()
                 for _, field, _, _ in string.Formatter().parse(text) if field}
        for p in self.preconditions:
            named |= {p.value} if isinstance(p, Reached) else {p.a, p.b} if isinstance(p, Different) else set()
        return named - own


Claims = Sequence[ClaimRow]


def check_claims(paper: str, chain: Chain, claims: Claims) -> None:
    """Every row compares rows of the paper's table, as many as its test reads, a comparison names a margin and only
    a comparison does, and a parent is a row. (The names of margins and thresholds are the report config's: a test
    checks them, so that a training stage, which imports this table, does not depend on the report's config.)"""
    for row in claims:
        where = f"{paper} claim {row.claim!r}"
        if unknown := [arm for arm in row.arms if arm not in chain]:
            raise ValueError(f"{where}: arm {unknown[0]!r} is not a row of the table ({', '.join(chain)})")
        if len(row.arms) != ARMS[row.test]:
            raise ValueError(f"{where}: test {row.test} compares {ARMS[row.test]} arm(s), got {len(row.arms)}")
        if (row.test == "beats") != bool(row.margin):
            raise ValueError(f"{where}: a beats claim names a margin of report.margins, and only it; got "
                             f"{row.margin!r}")
        for p in row.preconditions:
            if isinstance(p, Moved) and p.parent not in chain:
                raise ValueError(f"{where}: parent {p.parent!r} is not a row of the table")
