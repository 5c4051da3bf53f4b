"""Every paper figure the report quotes matches the seed text: each quoted number stands in its quote's excerpt, each
excerpt stands in its seed file, and every number in the "paper's figure" column of the committed default report is
a quoted number or a share derived from quoted numbers."""
import os
import re
from pathlib import Path

import pytest

from relin.report import paper_figures as pf

# The seed texts (shared/seeds/<seed>_*.txt beside the checkouts); RELIN_SEEDS points elsewhere.
SEEDS = Path(os.environ.get("RELIN_SEEDS", "/work/shared/seeds"))
REPORT = Path(__file__).parents[2] / "docs" / "results" / "default" / "summary.md"
NUMBER = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def _normal(text: str) -> str:
    return " ".join(text.split())


def _numbers(text: str) -> list[str]:
    return NUMBER.findall(text)


@pytest.mark.parametrize("name", sorted(pf.QUOTES))
def test_each_quoted_number_stands_in_its_excerpt(name):
    quote = pf.QUOTES[name]
    found = _numbers(quote.excerpt.replace("$", " ").replace("{", " ").replace("}", " "))
    assert quote.values and all(v in found for v in quote.values), (quote.values, found)


@pytest.mark.skipif(not SEEDS.is_dir(), reason=f"the seed texts are not at {SEEDS} (set RELIN_SEEDS)")
@pytest.mark.parametrize("name", sorted(n for n, q in pf.QUOTES.items() if q.seed is not None))
def test_each_excerpt_stands_in_its_seed(name):
    quote = pf.QUOTES[name]
    (path,) = SEEDS.glob(f"{quote.seed}_*.txt")
    text, at = _normal(path.read_text()), 0
    for part in quote.excerpt.split("[...]"):
        at = text.find(_normal(part), at)
        assert at >= 0, f"{name}: {part!r} is not in {path.name} (after the excerpt's earlier parts)"


def test_a_quote_from_no_seed_says_so():
    assert pf.HEDGEMAMBA_PERPLEXITY.seed is None and "not in seed 001" in pf.HEDGEMAMBA_PERPLEXITY.where
    with pytest.raises(ValueError, match="says so"):
        pf.Quote(None, "a summary", "x 1.0", ("1.0",))


def test_table3_quotes_each_control_with_its_own_figure():
    """Issue 62: the teacher-continuation control is the paper's 80.0, not the dataset control's 78.1."""
    assert pf.OPAL_TABLE3_DATASET.values == ("78.1",) and pf.OPAL_TABLE3_TEACHER.values == ("80.0",)
    assert round(pf.OPAL_TABLE3_ONPOLICY.number() - pf.OPAL_TABLE3_TEACHER.number(), 1) == 7.0


# Labels in the figure column that hold digits and are no figure: table, figure, equation and section numbers,
# contexts and budgets, benchmark and model names, seed numbers, Theorem 2's bound.
LABELS = re.compile(r"Table (?:[0-9]+|I)|Fig\. [0-9]+|Lemma [0-9]+|eqs?\. [0-9\-]+|§[0-9.]+|seed [0-9]+|[0-9]+K\b|"
                    r"[0-9]+M tokens|MATH-500|arXiv [0-9.]+|notes/methods\.md|SWA \([0-9]+, [0-9]+\)|\(2[0-9]{3}\)|"
                    r"Wang et al\. [0-9]{4}|Pythia-1B|10B tokens|Qwen[0-9.]*-[0-9]+B|t½|\(1 − λ_s\)")


def _figure_cells(summary: str) -> list[str]:
    cells = []
    for block in summary.split("\n\n"):
        lines = [line for line in block.splitlines() if line.startswith("|")]
        if not lines or "paper's figure" not in lines[0]:
            continue
        column = [c.strip() for c in lines[0].strip("|").split("|")].index("paper's figure")
        cells += [[c.strip() for c in line.strip("|").split(" | ")][column] for line in lines[2:]]
    return cells


@pytest.mark.skipif(not REPORT.exists(), reason="no committed default report")
def test_every_figure_the_committed_report_quotes_is_a_quoted_or_derived_number():
    allowed = {v for q in pf.QUOTES.values() for v in q.values} | {f"{v:.1f}" for v in pf.DERIVED.values()}
    cells = _figure_cells(REPORT.read_text())
    assert cells, "the report has verdict tables with a paper's figure column"
    for cell in cells:
        stray = [n for n in _numbers(LABELS.sub(" ", cell)) if n not in allowed]
        assert not stray, f"{cell!r}: {stray} is no figure of the seeds (relin.report.paper_figures)"
