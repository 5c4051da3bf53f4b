"""The ``report`` section: how verdicts are drawn, each comparative claim's margin (fixed before the run, with its
reason) and the thresholds of the preconditions a claim must meet to be judged."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .loader import ConfigError, option


@dataclass(kw_only=True)
class MarginConfig:
    """The smallest difference a comparative claim counts as a win."""

    value: float = option(help="the margin, in the claim's unit", minimum=0)
    unit: Literal["points", "questions"] = option("points", "points of the claim's metric (percentage points of "
                                                            "accuracy or recovery, points of the teacher's perplexity "
                                                            "share), or questions of the compared MME category")
    reason: str = option(help="why this margin (what difference the metric can resolve or the claim needs)")


# Every comparative claim of the report, by id, and its default margin.
MARGINS = {
    "opal.onpolicy_vs_offpolicy_matched": MarginConfig(
        value=2.0, reason="2 points of recovery: under a quarter of the paper's 8.9-point gap (Table 3: 87.0 vs 78.1)"),
    "opal.onpolicy_vs_offpolicy_teacher": MarginConfig(
        value=2.0, reason="2 points of recovery: under a third of the paper's 7.0-point gap (Table 3: 87.0 vs 80.0)"),
    "opal.kl_guided_vs_every_n": MarginConfig(value=2.0, reason="2 points of recovery, as Table 3's claims"),
    "lia_mtr.mme": MarginConfig(value=1.0, unit="questions",
                                reason="one question of the compared category's pairs (MME's resolution)"),
    "lia_mtr.niah_gate": MarginConfig(value=2.0, reason="2 points of accuracy: one needle in 50"),
    "hedgemamba.perplexity": MarginConfig(value=1.0, reason="1 point of the teacher's perplexity share"),
    "hedgemamba.recovery": MarginConfig(value=2.0, reason="2 points of task recovery, as OPAL's claims"),
}


@dataclass(kw_only=True)
class PreconditionsConfig:
    """What a run must show before a claim is judged; a claim whose preconditions fail is not testable here."""

    min_seeds: int = option(3, "training seeds every arm of a comparative claim needs (the `seeds` key)", minimum=1)
    learned: float = option(90.0, "a student learned its own training tasks when it recovers at least this % of "
                                  "the teacher on them", minimum=0, maximum=100)
    opal_horizon: int = option(48, "Table 3's regime: stage 3's rollouts reach this many tokens (errors compound "
                                   "over long generations; the paper's horizon starts at 512)", minimum=1)
    opal_kept_layers: int = option(2, "Table 4's regime: the GDN hybrid keeps at least this many attention layers (the "
                                      "paper keeps 9 of 36; one kept layer cannot show what a hybrid's attention "
                                      "layers retrieve together)", minimum=1)
    hedgemamba_tokens: float = option(1e9, "the regime of 'nearly matches the teacher's perplexity': this many "
                                           "training tokens in stage 2 (the secondary summaries' run: 10B)",
                                      minimum=0)


@dataclass(kw_only=True)
class ReportConfig:
    """The HTML/Markdown report built from stage outputs, and how its verdicts are drawn."""

    title: str = option("relin report", "report title")
    papers: list[Literal["opal", "hedgemamba", "lia_mtr"]] = option(
        ["opal", "hedgemamba", "lia_mtr"], "the papers the report (the DAG's target) shows, each with its chain; an "
                                           "overlay that runs some of them lists those")
    mastery: float = option(0.8, "a reference (teacher, text-only LLM, bridge-NIAH MHA) counts as competent on a task "
                                 "family at this accuracy; recovery is taken over the families the teacher masters",
                            minimum=0, maximum=1)
    resamples: int = option(2000, "bootstrap replicates behind every 95% interval", minimum=100)
    min_steps: int = option(50, "a run whose training stages took fewer optimizer steps is a plumbing run: the report "
                                "says at its head that its verdicts are not evidence", minimum=1)
    margins: dict[str, MarginConfig] = option(help="each comparative claim's margin, by claim id (fixed before the "
                                                   "run, with its reason)", default_factory=lambda: dict(MARGINS))
    preconditions: PreconditionsConfig = option(default_factory=PreconditionsConfig,
                                                help="thresholds of the preconditions a claim must meet")

    def validate(self, prefix: str) -> None:
        if not self.papers or len(set(self.papers)) != len(self.papers):
            raise ConfigError(f"{prefix}.papers: expected distinct papers, at least one, got {self.papers}")
        unknown = sorted(set(self.margins) - set(MARGINS))
        if unknown:
            raise ConfigError(f"{prefix}.margins.{unknown[0]}: unknown claim (expected one of: {', '.join(MARGINS)})")
        # A config that sets some margins keeps the defaults of the others.
        self.margins = {**MARGINS, **self.margins}
