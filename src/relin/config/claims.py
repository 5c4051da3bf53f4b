"""A paper's claims as one table beside its models' (:mod:`.chain`): per claim its text and the seed figure it
quotes, its kind, the chain rows it compares, the metric, the test, the margin and the preconditions, all as data.

One judge (:func:`relin.report.judge.judge`) turns any row into a verdict; the paper's report section supplies only
what the rows name but cannot compute from the scores alone (``facts``: a rollout horizon, the layers a selection
keeps, a figure quoted from the seed). Adding a claim, or a precondition to a claim, is one row.

Texts are ``str.format`` templates: ``claim`` and ``source`` may name ``threshold`` and the section's facts;
``ours`` and ``contradicted`` also name ``a`` and ``b`` (each arm's metric with its interval), ``difference``
(favoured minus other), ``used`` (the families the metric was taken over), the facts the first arm's metric reports
(e.g. the largest N of a memory fit), for ``every``, ``worst`` (the lowest part's metric), ``worst_part`` (its
name), ``reached`` (the parts whose interval clears the threshold), ``parts`` (how many) and ``below`` (the names of
those whose interval lies below it), and for ``all``, ``compared`` (each comparison clause's ``shown`` text). A row
whose arms are not all scored, or whose texts or preconditions name a fact neither the section nor the metric
supplied, is not shown.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence, Union

Kind = Literal["claim", "check", "beyond"]
# at_least / at_most: the first arm's metric against ``threshold``; beats: the favoured arm's minus the other's against
# the claim's margin (paired items, seeds paired by index); within: that difference inside ± the margin (or
# ± ``threshold`` where the row names no margin); every: each part of the arm's metric (a NIAH cell) at least
# ``threshold``; all: every clause of the row's ``clauses`` holds (a compound claim: reproduced when each does,
# contradicted when one fails, naming each that fails).
Test = Literal["at_least", "at_most", "beats", "within", "every", "all"]
# recovery: a ratio of averages over the families the teacher masters, in % (``over``: the items a filter the section
# names keeps, e.g. the needles beyond SWA's stacked reach); perplexity_share: teacher / student
# perplexity on the same passages, in %. LIA-MTR's (relin.report.lia_scores): niah_accuracy (a bridge's NIAH accuracy
# over the cells ``over`` names: all, trained, earliest, latest past training; per cell for ``every``), mme_accuracy
# (MME-style accuracy over ``over`` = "<phase>/<category>" or "<phase>"), memory_exponent (the slope of log peak
# memory on log N, ``over`` = the MHA implementation or "-"), state_bound (Theorem 2's largest ratio to the bound),
# constant_input_growth (Lemma 2: the output's growth exponent on a constant input), write_gate (the bridge's write
# gate over the evaluation images: its mean, with the quantities ``mean`` and ``std``, the token-wise standard
# deviation), mixer (the scale mixer's mean weight per scale, one part per half-life, with the quantity ``move``: the
# largest mean move from the uniform 1/S, and the fact ``scales``). Any paper's: figure (an exact figure the paper's
# section reads from a stage's own file, ``over`` its name: the initialisation's logit gap, the decode cache's share).
Metric = Literal["recovery", "perplexity_share", "niah_accuracy", "mme_accuracy", "memory_exponent", "state_bound",
                 "constant_input_growth", "write_gate", "mixer", "figure"]
ARMS = {"at_least": 1, "at_most": 1, "beats": 2, "within": 2, "every": 1, "all": 1}


@dataclass(frozen=True)
class Competent:
    """The teacher (or the chain row ``reference``, called ``label``) scores at least the mastery (or ``threshold``,
    if higher) on each family the claim reads: :func:`relin.report.preconditions.competent`. ``over``: the families
    the metric kept (``used``; all of ``families`` when it kept none), or every family of ``families`` that has items
    (``all``). A reference's scores are its metric's (LIA-MTR: the caption reference per MME category, MHA's worst NIAH
    cell); not required when the first arm was not scored."""

    threshold: float = 0.0
    over: Literal["used", "all"] = "used"
    reference: str = ""
    label: str = "the teacher"
    trained_on: str = ""
    """A fact listing the families the teacher trained on: among those it is scored on, only a win can be read (the
    paper's teacher meets them zero-shot); empty: none."""


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
    """The run reached the claim's regime: the fact ``value`` is at least ``report.preconditions.<needed>`` (a name)
    or ``needed`` (a number) (:func:`relin.report.preconditions.reached`)."""

    what: str
    value: str
    needed: str | float
    unit: str = ""
    shown: str = ""
    """A fact holding the measured value in words, when more than the number (the layers kept, of how many)."""


@dataclass(frozen=True)
class Learned:
    """The chain row ``arm`` learned its task: its metric over ``over`` (or over the families ``families`` names) at
    least the mastery (or ``report.preconditions.<threshold>``), ``what`` a template over the facts, the score shown as
    ``shown`` (a template over ``a``, the score, and ``used``, the families it kept; empty: the score)
    (:func:`relin.report.preconditions.learned`)."""

    arm: str
    what: str
    over: str = ""
    families: str = ""
    threshold: str = ""
    shown: str = ""


@dataclass(frozen=True)
class Items:
    """The run holds items the claim reads: each family of the row's ``families`` that has items keeps at least one
    under the first arm's ``over`` (``what`` a template over the facts): :func:`relin.report.preconditions.items`."""

    what: str


@dataclass(frozen=True)
class AboveChance:
    """An arm lies above chance by a margin (``who`` a template over the facts):
    :func:`relin.report.preconditions.above_chance`.

    ``arm``: the index of one of the row's arms, read on the row's metric (its ``quantity``, a named estimate the
    metric reports, where given), or a chain row read on ``metric`` over ``over``. ``chance``: the metric's chance
    unless given. ``margin``: the row's margin (none given), a key of ``report.margins`` (a margin in questions as a
    share of what ``over`` reads), or a number in the estimate's unit. A chain row with nothing scored reads as exactly
    at chance, unless ``required`` is false: then the precondition is left out."""

    arm: int | str
    who: str
    metric: Metric | None = None
    over: str = ""
    quantity: str = ""
    chance: float | None = None
    margin: str | float | None = None
    required: bool = True


@dataclass(frozen=True)
class Bounded:
    """Each value of the quantity ``quantity`` that the first arm's metric reports over what it used (LIA-MTR: the
    per-patch probe per category, Lemma 2's reduction error) lies in [``low``, ``high``]
    (:func:`relin.report.preconditions.within`); not required when the run measured none."""

    what: str
    quantity: str
    high: float
    low: float = float("-inf")
    fmt: str = ".2f"


@dataclass(frozen=True)
class Exact:
    """The measurement is exact: the fact ``value`` (the methods used) is one method, of ``allowed``
    (:func:`relin.report.preconditions.exact`)."""

    what: str
    value: str
    allowed: tuple[str, ...]


@dataclass(frozen=True)
class Different:
    """The two conditions the claim compares differ: facts ``a`` and ``b`` (``shown`` a template over the facts):
    :func:`relin.report.preconditions.different`."""

    what: str
    a: str
    b: str
    shown: str


Precondition = Union[Competent, Moved, EnoughSeeds, Headroom, Reached, Different, Learned, AboveChance, Bounded, Exact,
                     Items]


@dataclass(frozen=True)
class Inside:
    """A clause of an ``all`` test: the first arm's quantity ``quantity`` (a named estimate its metric reports) lies in
    [``low``, ``high``]: holds when its interval lies inside, fails when it lies wholly outside. ``contradicted``: the
    reason it gives when it fails (a template over the facts)."""

    quantity: str
    low: float = float("-inf")
    high: float = float("inf")
    contradicted: str = ""


@dataclass(frozen=True)
class Apart:
    """A clause of an ``all`` test: two chain rows differ on ``metric`` over ``over`` (``arms[0]`` minus ``arms[1]``,
    paired) by more than the margin ``margin`` (a key of ``report.margins``) either way: holds when the difference's
    interval lies beyond ± the margin, fails when it lies inside. ``shown``: the difference in our text (a template
    over ``difference``), ``unscored``: the precondition that fails while either row has nothing scored."""

    arms: tuple[str, str]
    metric: Metric
    over: str
    margin: str
    contradicted: str
    shown: str
    unscored: str


Clause = Union[Inside, Apart]


@dataclass(frozen=True)
class ClaimRow:
    """One claim of a paper's table."""

    claim: str
    """The claim in words (a template: ``threshold`` and facts)."""
    source: str
    """The seed's figure it quotes and where (a template over the facts)."""
    arms: tuple[str, ...]
    """The chain rows it reads: one for ``at_least``/``at_most``/``every``, two for ``beats``/``within`` (the favoured
    first unless ``favoured`` says otherwise; a row may appear twice, over two parts)."""
    metric: Metric
    test: Test
    kind: Kind = "claim"
    margin: str = ""
    """``beats``/``within``: the key of ``report.margins`` (fixed before the run, with its reason)."""
    threshold: float = 0.0
    """``at_least``/``at_most``/``every``: the bound, in the metric's unit; ``within`` without a margin: the
    tolerance."""
    families: str = "all"
    """The task families the metric reads, by a name the paper's section resolves (``all``: every scored one)."""
    preconditions: tuple[Precondition, ...] = ()
    ours: str = "{a} vs {b}; difference {difference} points"
    names: tuple[str, str] = ("A", "B")
    """How a ``beats`` verdict names the two sides, favoured first (templates over the facts)."""
    over: tuple[str, ...] = ()
    """The part of the metric each arm reads, in the metric's vocabulary (one for every arm, or one per arm); empty:
    its whole (``families``)."""
    favoured: int = 0
    """The index of the arm a ``beats`` or ``within`` claim favours: the difference is it minus the other."""
    labels: tuple[str, ...] = ()
    """The arms' names in the preconditions that list them (headroom); empty: their evaluations' names."""
    contradicted: str = ""
    """The reason of a contradiction in the claim's words (a template), in place of the test's own."""
    part: str = "part"
    """What an ``every`` test's parts are called in its verdict (a cell)."""
    threshold_over: str = ""
    """A fact the threshold is divided by (the mixer's ``scales``: a share of the uniform 1/S); empty: none."""
    clauses: tuple[Clause, ...] = ()
    """``all``: the clauses that must all hold, in the order a contradiction names the failed ones."""
    inconclusive: str = ""
    """The reason of an inconclusive verdict in the claim's words (a template), in place of the test's own."""
    unscored: tuple[Precondition, ...] = ()
    """The preconditions that say why the first arm has nothing scored (e.g. its chain did not run), shown in place of
    the others while it has none; empty: the others, as far as they apply."""
    seeded: bool = True
    """Whether the arms rest on training seeds (false: a model no training made, e.g. SWA, the teacher's weights under
    windows)."""

    def templates(self, unscored: bool = False) -> list[str]:
        if unscored:
            return [self.claim, self.source]
        texts = [self.claim, self.source, self.ours, self.contradicted, self.inconclusive, *self.names]
        texts += [p.shown for p in self.preconditions if isinstance(p, Different)]
        texts += [p.what for p in self.preconditions if isinstance(p, Learned)]
        texts += [p.who for p in self.preconditions if isinstance(p, AboveChance)]
        texts += [p.what for p in self.preconditions if isinstance(p, Items)]
        texts += [c.contradicted for c in self.clauses]
        return texts

    def facts(self, unscored: bool = False) -> set[str]:
        """The facts the row names: in its texts, and as the values its preconditions compare (``unscored``: those
        shown while the first arm has nothing scored: the claim, its source and the ``unscored`` preconditions)."""
        own = {"a", "b", "difference", "used", "threshold", "worst", "worst_part", "reached", "parts", "below",
               "compared"}
        named = {field.split(".")[0].split("[")[0] for text in self.templates(unscored)
                 for _, field, _, _ in string.Formatter().parse(text) if field}
        for p in (self.unscored if unscored else self.preconditions):
            named |= ({p.value} if isinstance(p, (Reached, Exact)) else {p.a, p.b} if isinstance(p, Different)
                      else set())
            named |= {getattr(p, key) for key in ("shown", "trained_on") if isinstance(p, (Reached, Competent))
                      and getattr(p, key, "")}
        if self.threshold_over and not unscored:
            named.add(self.threshold_over)
        return named - own

    def part_of(self, index: int) -> str:
        """The part of the metric the arm at ``index`` reads (empty: its whole)."""
        return self.over[index if len(self.over) > 1 else 0] if self.over else ""


Claims = Sequence[ClaimRow]


def check_claims(paper: str, chain: Mapping[str, Any], claims: Claims) -> None:
    """Every row compares rows of the paper's table, as many as its test reads, a beats claim names a margin and only
    a comparison does, ``over`` names one part or one per arm, and a parent is a row. (The names of margins and
    thresholds are the report config's: a test checks them, so that a training stage, which imports this table, does
    not depend on the report's config.)"""
    for row in claims:
        where = f"{paper} claim {row.claim!r}"
        if unknown := [arm for arm in row.arms if arm not in chain]:
            raise ValueError(f"{where}: arm {unknown[0]!r} is not a row of the table ({', '.join(chain)})")
        if len(row.arms) != ARMS[row.test]:
            raise ValueError(f"{where}: test {row.test} compares {ARMS[row.test]} arm(s), got {len(row.arms)}")
        if (row.test == "beats" and not row.margin) or (row.margin and row.test not in ("beats", "within")):
            raise ValueError(f"{where}: a beats claim names a margin of report.margins, and only a comparison "
                             f"(beats, within) does; got {row.margin!r}")
        if len(row.over) not in (0, 1, len(row.arms)) or not 0 <= row.favoured < len(row.arms):
            raise ValueError(f"{where}: over names one part or one per arm ({len(row.arms)}), and favoured an arm; "
                             f"got over {row.over!r}, favoured {row.favoured}")
        if (row.test == "all") != bool(row.clauses):
            raise ValueError(f"{where}: an all test names its clauses, and only an all test does; got test {row.test} "
                             f"with {len(row.clauses)} clause(s)")
        named = [arm for c in row.clauses if isinstance(c, Apart) for arm in c.arms]
        for p in (*row.preconditions, *row.unscored):
            parent = (p.parent if isinstance(p, Moved) else p.arm if isinstance(p, Learned)
                      else p.arm if isinstance(p, AboveChance) and isinstance(p.arm, str) else None)
            if parent is not None:
                named.append(parent)
            if isinstance(p, AboveChance) and isinstance(p.arm, int) and not 0 <= p.arm < len(row.arms):
                raise ValueError(f"{where}: above-chance arm {p.arm} is not an index of its arms")
        if unknown := [arm for arm in named if arm not in chain]:
            raise ValueError(f"{where}: {unknown[0]!r} is not a row of the table")
