"""The report reads top to bottom (issue #63 item 8): every claim once, under Verdicts, paper by paper; a verdict
cell never repeats the preconditions beside it; cells wrap between words; the contents link every section."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from relin.report.build import _measurements, claims_overview
from relin.report.page import STYLE, Section, render_html, render_markdown
from relin.report.preconditions import competent, headroom, reached
from relin.report.table import Table
from relin.report.verdicts import Claim, Estimate, Margin, beats, judged, verdict_tables

WIN = Estimate(5.0, np.linspace(4.0, 6.0, 101))
TIE = Estimate(0.0, np.linspace(-1.0, 1.0, 101))
MARGIN = Margin(1.0, "one point")


def _claims() -> list[Claim]:
    weak = (competent("the teacher", {"niah_single": 0.0}, 0.8), reached("the horizon", 64, 48, " tokens"))
    capped = (headroom({"A": Estimate(1.0, np.ones(101)), "B": Estimate(0.5, np.full(101, 0.5))}, 1.0, 0.0, 0.02,
                       favoured="A"),)
    return [Claim("OPAL", "the hybrid recovers NIAH", "Table 4", "–", judged(weak, lambda: beats(WIN, MARGIN)), weak),
            Claim("OPAL", "A beats B at the ceiling", "Table 3", "+0.0", judged(capped, lambda: beats(TIE, MARGIN)),
                  capped, margin=MARGIN),
            Claim("HedgeMamba", "stage 2 beats the controls", "Table 1", "+5.0", judged((), lambda: beats(WIN, MARGIN)),
                  margin=MARGIN)]


def _page() -> tuple[list[Section], str]:
    claims = _claims()
    table4 = Table("OPAL Table 4 analogue", ["model", "NIAH"], [["hybrid", 0.5]])
    opal = Section("OPAL: the paper's section", [*verdict_tables([c for c in claims if c.paper == "OPAL"], "OPAL"),
                                                   table4])
    sections = [claims_overview(claims), _measurements(opal)]
    return sections, render_html("R", sections, ["results/x.json"])


def test_every_claim_stands_once_under_verdicts_paper_by_paper():
    sections, page = _page()
    verdicts, opal = sections
    assert [t.title for t in verdicts.blocks] == ["OPAL: the paper's claims", "HedgeMamba: the paper's claims"]
    assert all("paper" not in t.columns for t in verdicts.blocks), "the paper is the table's title, not a column"
    assert [t.title for t in opal.blocks] == ["OPAL Table 4 analogue"], "the measurements stay in the paper section"
    for claim in _claims():
        assert page.count(claim.claim) == 1, claim.claim


def test_a_verdict_cell_does_not_repeat_the_preconditions_beside_it():
    rows = {row[0]: row for table in claims_overview(_claims()).blocks for row in table.cells()}
    verdict, conditions = rows["the hybrid recovers NIAH"][4:6]
    assert verdict == "not testable here"
    assert conditions.startswith("✗ the teacher competent (≥ 0.8) on each family used: niah_single 0.00; ✓ the "
                                 "horizon")
    verdict, conditions = rows["A beats B at the ceiling"][4:6]
    assert verdict.startswith("not testable here (the run shows contradicted") and "ceiling" not in verdict
    assert "at the ceiling 1: A" in conditions and conditions.endswith("margin 1 (one point)")
    assert rows["stage 2 beats the controls"][4] == "reproduced"


def test_cells_wrap_between_words_and_the_contents_link_every_section():
    sections, page = _page()
    assert "anywhere" not in STYLE and "overflow-wrap: break-word" in STYLE
    ids = re.findall(r'<h2 id="([^"]+)">', page)
    assert ids == ["verdicts", "opal-the-papers-section", "sources"]
    assert re.findall(r'<li><a href="#([^"]+)">', page) == ids
    markdown = render_markdown("R", sections, ["results/x.json"])
    assert "1. [Verdicts](#verdicts)\n2. [OPAL: the paper's section](#opal-the-papers-section)\n" in markdown


def test_the_committed_copy_holds_the_page_beside_its_markdown(tmp_path):
    """`relin publish-report` copies index.html with summary.md and the figures, keeps what a person wrote, and
    refuses a report without its page in one line; the default config's committed copy has both pages."""
    from relin.cli import main

    report, copy = tmp_path / "report", tmp_path / "docs"
    (report / "figures").mkdir(parents=True)
    (report / "figures" / "a.png").write_bytes(b"png")
    (report / "summary.md").write_text("# R\n")
    copy.mkdir()
    (copy / "README.md").write_text("what the run was")
    assert main(["publish-report", "--report", str(report), "--to", str(copy)]) == 2
    assert not (copy / "summary.md").exists(), "nothing copied without the page"
    (report / "index.html").write_text("<!doctype html>")
    assert main(["publish-report", "--report", str(report), "--to", str(copy)]) == 0
    assert sorted(p.name for p in copy.iterdir()) == ["README.md", "figures", "index.html", "summary.md"]
    assert (copy / "README.md").read_text() == "what the run was"
    default = Path(__file__).resolve().parents[2] / "docs" / "results" / "default"
    assert (default / "index.html").is_file() and (default / "summary.md").is_file()
