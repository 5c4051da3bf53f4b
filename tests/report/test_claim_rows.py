"""A claim is one row of its paper's table (relin.config.<paper>.CLAIMS): a new comparison between two existing arms,
added as a row and nothing else, is judged and stands in the report's Verdicts."""
import pytest

from relin.config import opal as opal_table
from relin.config.claims import ClaimRow, EnoughSeeds, Headroom, check_claims
from relin.report.build import claims_overview
from relin.report.lm_scores import ItemScores
from relin.report.opal import claims, opal_section
from relin.report.page import render_markdown
from relin.report.verdicts import REPRODUCED

from .test_opal_verdicts import LAYERS, SETTINGS, STRONG, _arm, _items

NEW = ClaimRow("Stage 2B beats stage 1 in recovery", "a row added by a test", ("offpolicy_long", "align"), "recovery",
               "beats", margin="opal.kl_guided_vs_every_n", families="tasks", preconditions=(EnoughSeeds(), Headroom()),
               names=("2B", "stage 1"))


def test_a_claim_row_added_to_the_table_stands_in_the_report(monkeypatch, tmp_path):
    monkeypatch.setattr(opal_table, "CLAIMS", (*opal_table.CLAIMS, NEW))
    models = [_items("teacher-qwen3", STRONG), *_arm("opal-offpolicy_long", 0.9), *_arm("opal-align", 0.5),
              *_arm("opal-onpolicy", 0.9)]
    scores = ItemScores(models, resamples=500)
    found = claims(scores, SETTINGS, None, layers=LAYERS)
    claim = next(c for c in found if c.claim == NEW.claim)
    assert claim.verdict.outcome == REPRODUCED and claim.seeds == 3 and claim.margin.value == 2.0
    assert claim.ours.endswith("points") and " vs " in claim.ours
    section, listed = opal_section(scores, SETTINGS, {}, {}, None, {}, tmp_path, "figures", LAYERS)
    page = render_markdown("R", [claims_overview(listed), section], [])
    row = next(line for line in page.splitlines() if NEW.claim in line)
    assert "a row added by a test" in row and REPRODUCED in row and claim.ours in row


def test_a_row_naming_no_row_of_the_table_is_refused():
    with pytest.raises(ValueError, match="'offpolicy_huge' is not a row of the table"):
        check_claims("opal", opal_table.CHAIN, [ClaimRow("x", "y", ("offpolicy_huge", "align"), "recovery", "beats",
                                                         margin="opal.kl_guided_vs_every_n")])
    with pytest.raises(ValueError, match="names a margin of report.margins"):
        check_claims("opal", opal_table.CHAIN, [ClaimRow("x", "y", ("onpolicy", "align"), "recovery", "beats")])


@pytest.mark.parametrize("paper", ["opal", "hedgemamba", "lia_mtr"])
def test_every_row_names_a_margin_and_thresholds_of_the_report_config(paper):
    from importlib import import_module

    from relin.config.claims import Reached
    from relin.config.report import MARGINS, PreconditionsConfig

    for row in import_module(f"relin.config.{paper}").CLAIMS:
        assert not row.margin or row.margin in MARGINS, row
        assert all(not isinstance(p.needed, str) or p.needed in PreconditionsConfig.__dataclass_fields__
                   for p in row.preconditions if isinstance(p, Reached)), row
