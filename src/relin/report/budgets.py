"""Each trained model's budget beside the paper's for its stage: the report's budget tables (OPAL, HedgeMamba).

Ours are counted exactly by the training loop (``train_metrics.json``'s ``budget``, :class:`relin.train.budget.Budget`);
the paper's are quoted numbers (:mod:`relin.report.paper_figures`) with the unit the paper writes after them, "not
stated" where the paper gives none, and the ratio ours / paper's where both exist.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .inputs import NamedJson
from .paper_figures import Quote
from .table import Table

NOT_STATED = "not stated"
# The unit suffixes the papers write after a budget (Table 6's "100M", "3.1K", "2B").
SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9}
PAPER_COLUMNS = ["paper's optimizer steps", "paper's tokens", "paper's source", "steps ours / paper's",
                 "tokens ours / paper's"]


@dataclass(frozen=True)
class Stated:
    """The ``index``-th number of ``quote`` followed by ``unit``, as the paper writes it (``100`` and ``M``)."""

    quote: Quote
    index: int = 0
    unit: str = ""

    def value(self) -> float:
        return self.quote.number(self.index) * SCALE[self.unit]

    def text(self) -> str:
        return f"{self.quote.values[self.index]}{self.unit}" + ("" if self.quote.seed else " [unconfirmed]")


@dataclass(frozen=True)
class PaperBudget:
    """A stage's budget as the paper states it: its optimizer steps and tokens (``None``: not stated), where it
    says so, and which of our counts its tokens are (``forward_tokens``: the tokens the student read;
    ``target_tokens``: the positions the teacher scored, a rollout's generated tokens)."""

    steps: Stated | None = None
    tokens: Stated | None = None
    source: str = ""
    counts: str = "forward_tokens"


def budget_of(train: dict[str, NamedJson], run: str) -> dict:
    """The ``budget`` of ``run``'s ``train_metrics.json``; empty when the run wrote none."""
    record = train.get(run)
    return record.data.get("budget", {}) if record else {}


def _ratio(ours: Any, paper: Stated | None) -> float | None:
    return None if ours is None or paper is None else float(ours) / paper.value()


def paper_cells(paper: PaperBudget, steps: Any, tokens: Any) -> list:
    """The paper's steps and tokens, where it states them, and ours over each (``steps``, ``tokens``: ours)."""
    return [paper.steps.text() if paper.steps else NOT_STATED, paper.tokens.text() if paper.tokens else NOT_STATED,
            paper.source or "–", _ratio(steps, paper.steps), _ratio(tokens, paper.tokens)]


def budget_table(title: str, columns: list[str], rows: list[tuple[list, PaperBudget, Any, Any]], note: str,
                 digits: int = 0) -> Table | None:
    """``rows`` of (our cells under ``columns``, the paper's budget for that stage, our steps and tokens compared
    with it) as one table, the paper's columns after ours; ``None`` without rows."""
    if not rows:
        return None
    return Table(title=title, columns=[*columns, *PAPER_COLUMNS],
                 rows=[[*ours, *paper_cells(paper, steps, tokens)] for ours, paper, steps, tokens in rows],
                 digits=digits, formats={c: ".2g" for c in PAPER_COLUMNS[-2:]}, note=note)
