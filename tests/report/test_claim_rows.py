"""A claim is one row of its paper's table (relin.config.<paper>.CLAIMS): a new comparison between two existing arms,
added as a row and nothing else, is judged and stands in the report's Verdicts."""
import csv
import json

import pytest

from relin.config import lia_mtr as lia_table
from relin.config import opal as opal_table
from relin.config.claims import AboveChance, Apart, ClaimRow, EnoughSeeds, Headroom, Inside, Learned, check_claims
from relin.report.build import claims_overview
from relin.report.lm_scores import ItemScores
from relin.report.opal import claims, opal_section
from relin.report.page import render_markdown
from relin.report.verdicts import CONTRADICTED, NOT_TESTABLE, REPRODUCED

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


LIA_NEW = ClaimRow("Bridge NIAH: MHA beats LIA-MTR past the trained lengths", "a LIA-MTR row added by a test",
                   ("mha", "lia_mtr"), "niah_accuracy", "beats", margin="lia_mtr.niah_gate",
                   names=("MHA", "LIA-MTR"), ours="mean {a} vs {b}",
                   preconditions=(Learned("lia_mtr", "the task at its trained lengths (≤ {trained})", "trained"),
                                  Headroom(), EnoughSeeds()))


def _niah_files(root, accuracy: dict[str, float]) -> list[dict]:
    """Each bridge's NIAH outputs as the stage writes them: right at the trained length 64, right with probability
    ``accuracy`` at 1024 (every depth alike)."""
    entries = []
    for bridge, share in accuracy.items():
        folder = root / bridge
        folder.mkdir(parents=True)
        (folder / "metrics.json").write_text(json.dumps({"chance": 0.125, "trained_lengths": [64]}))
        with open(folder / "items.csv", "w", newline="") as fh:
            writer = csv.DictWriter(fh, ["length", "depth", "correct"])
            writer.writeheader()
            writer.writerows({"length": n, "depth": d, "correct": int(n == 64 or i < share * 50)}
                             for n in (64, 1024) for d in (0.0, 1.0) for i in range(50))
        (folder / "history.csv").write_text("step,loss\n1,2.0\n2,0.5\n")
        entries.append({"name": bridge, **{k: str(folder / f) for k, f in (("metrics", "metrics.json"),
                                                                            ("items", "items.csv"),
                                                                            ("history", "history.csv"))}})
    return entries


def test_a_lia_mtr_claim_row_added_to_the_table_stands_in_the_report(monkeypatch, tmp_path):
    from relin.config.report import PreconditionsConfig
    from relin.report.lia_mtr import LiaSettings, lia_mtr_section

    monkeypatch.setattr(lia_table, "CLAIMS", (*lia_table.CLAIMS, LIA_NEW))
    files = {"niah": _niah_files(tmp_path / "niah", {"mha": 0.9, "lia_mtr": 0.5})}
    (tmp_path / "figures").mkdir()
    one_seed = LiaSettings(mastery=0.8, resamples=300, pre=PreconditionsConfig(min_seeds=1))
    section, listed = lia_mtr_section(files, one_seed, tmp_path / "figures", "figures")
    claim = next(c for c in listed if c.claim == LIA_NEW.claim)
    assert claim.verdict.outcome == REPRODUCED and claim.seeds == 1 and claim.margin.value == 2.0
    assert claim.ours.startswith("mean 0.95") and " vs 0.75" in claim.ours, claim.ours
    page = render_markdown("R", [claims_overview(listed), section], [])
    row = next(line for line in page.splitlines() if LIA_NEW.claim in line)
    assert "a LIA-MTR row added by a test" in row and REPRODUCED in row and "lia_mtr learned the task" in row
    # under the default report.preconditions.min_seeds (3), one training seed leaves the row not testable
    section, listed = lia_mtr_section(files, LiaSettings(mastery=0.8, resamples=300), tmp_path / "figures", "figures")
    assert next(c for c in listed if c.claim == LIA_NEW.claim).verdict.outcome == NOT_TESTABLE


GATE_NEW = ClaimRow("The head_matrix reading's write gate stays in [0.3, 0.7] and removing it changes the answers",
                    "a compound LIA-MTR row added by a test", ("lia_mtr_head_matrix",), "write_gate", "all",
                    clauses=(Inside("mean", 0.3, 0.7, contradicted="the mean lies outside [0.3, 0.7]"),
                             Apart(("lia_mtr_head_matrix", "lia_mtr_no_gate"), "mme_accuracy", "instruct",
                                   "lia_mtr.mme", contradicted="removing the gate changes nothing",
                                   shown="; minus the ablation {difference} points", unscored="the ablation scored")),
                    ours="gate {a}{compared}",
                    preconditions=(AboveChance("lia_mtr_head_matrix", "lia_mtr_head_matrix after phase 2",
                                               metric="mme_accuracy", over="instruct", margin="lia_mtr.mme"),))


def _mme_files(root, accuracy: dict[str, float]) -> list[dict]:
    """Each bridge's MME outputs as lia-mtr-eval-mme writes them: 20 images a category, a share ``accuracy`` of them
    answered right (both questions) after each phase, the others wrong."""
    from relin.eval.mme import ITEM_COLUMNS, MMEAnswer, scored_items
    from relin.io import atomic_write_csv
    from relin.report.lia_mtr import CATEGORIES, PHASES

    entries = []
    for bridge, share in accuracy.items():
        folder = root / bridge
        folder.mkdir(parents=True)
        items = [row for phase in PHASES for row in scored_items(phase, {
            task: [MMEAnswer(f"{task}_{i}", "q", gt, gt if i < share * 20 else {"yes": "no", "no": "yes"}[gt])
                   for i in range(20) for gt in ("yes", "no")] for task in CATEGORIES})]
        atomic_write_csv(folder / "items.csv", items, ITEM_COLUMNS)
        (folder / "metrics.json").write_text(json.dumps({p: {"perception": 300.0} for p in PHASES}))
        entries.append({"name": bridge, "metrics": str(folder / "metrics.json"), "items": str(folder / "items.csv")})
    return entries


def _probe_file(root, gates: list[float]) -> str:
    """probe.json as lia-mtr-bridge-probe writes it, both readings' gates per image ``gates``."""
    one = {"gate_per_image": gates, "gate_mean": sum(gates) / len(gates), "gate_std": 0.1, "half_lives": [2.0, 100.0],
           "mixer_mean": [0.5, 0.5], "mixer_per_image": [[0.5, 0.5]] * len(gates)}
    (root / "probe.json").write_text(json.dumps({**one, "bridges": {"lia_mtr": one, "lia_mtr_head_matrix": one}}))
    return str(root / "probe.json")


def test_a_compound_lia_mtr_claim_row_added_to_the_table_stands_in_the_report(monkeypatch, tmp_path):
    """A gate-like row (an ``all`` test: a band on the gate's mean and an ablation that changes the answers), added to
    the table and nothing else, is judged on the section's inputs and stands in the report with its preconditions."""
    from relin.report.lia_mtr import LiaSettings, lia_mtr_section

    monkeypatch.setattr(lia_table, "CLAIMS", (*lia_table.CLAIMS, GATE_NEW))
    mme = _mme_files(tmp_path / "mme", {"lia_mtr_head_matrix": 0.9, "lia_mtr_no_gate": 0.6})
    (tmp_path / "figures").mkdir()
    settings = LiaSettings(mastery=0.8, resamples=300)
    files = {"mme": mme, "probe": _probe_file(tmp_path, [0.45, 0.5, 0.55] * 10)}
    section, listed = lia_mtr_section(files, settings, tmp_path / "figures", "figures")
    claim = next(c for c in listed if c.claim == GATE_NEW.claim)
    assert claim.verdict.outcome == REPRODUCED, claim.verdict
    assert claim.ours.startswith("gate 0.500 [") and "; minus the ablation +30.0 [" in claim.ours, claim.ours
    page = render_markdown("R", [claims_overview(listed), section], [])
    row = next(line for line in page.splitlines() if GATE_NEW.claim in line)
    assert "a compound LIA-MTR row added by a test" in row and REPRODUCED in row
    assert "lia_mtr_head_matrix after phase 2 above chance 0.5" in row
    # a gate outside the band fails its clause; without the ablation the row is not testable, naming why
    shut = {**files, "probe": _probe_file(tmp_path, [0.9] * 30)}
    verdict = next(c for c in lia_mtr_section(shut, settings, tmp_path / "figures", "figures")[1]
                   if c.claim == GATE_NEW.claim).verdict
    assert verdict.outcome == CONTRADICTED and verdict.reason == "the mean lies outside [0.3, 0.7]"
    alone = {**files, "mme": mme[:1]}
    verdict = next(c for c in lia_mtr_section(alone, settings, tmp_path / "figures", "figures")[1]
                   if c.claim == GATE_NEW.claim).verdict
    assert verdict.outcome == NOT_TESTABLE and "the ablation scored" in verdict.reason


def test_a_row_naming_no_row_of_the_table_is_refused():
    with pytest.raises(ValueError, match="'offpolicy_huge' is not a row of the table"):
        check_claims("opal", opal_table.CHAIN, [ClaimRow("x", "y", ("offpolicy_huge", "align"), "recovery", "beats",
                                                         margin="opal.kl_guided_vs_every_n")])
    with pytest.raises(ValueError, match="names a margin of report.margins"):
        check_claims("opal", opal_table.CHAIN, [ClaimRow("x", "y", ("onpolicy", "align"), "recovery", "beats")])
    with pytest.raises(ValueError, match="'lia_mtr_huge' is not a row of the table"):
        check_claims("lia_mtr", lia_table.BRIDGES, [ClaimRow("x", "y", ("lia_mtr",), "niah_accuracy", "every",
                                                             preconditions=(Learned("lia_mtr_huge", "", ""),))])
    with pytest.raises(ValueError, match="'lia_mtr_huge' is not a row of the table"):
        check_claims("lia_mtr", lia_table.BRIDGES, [ClaimRow("x", "y", ("lia_mtr",), "write_gate", "all", clauses=(
            Apart(("lia_mtr", "lia_mtr_huge"), "mme_accuracy", "instruct", "lia_mtr.mme", "", "", ""),))])
    with pytest.raises(ValueError, match="an all test names its clauses"):
        check_claims("lia_mtr", lia_table.BRIDGES, [ClaimRow("x", "y", ("lia_mtr",), "write_gate", "all")])
    with pytest.raises(ValueError, match="over names one part or one per arm"):
        check_claims("lia_mtr", lia_table.BRIDGES, [ClaimRow("x", "y", ("lia_mtr", "mha"), "niah_accuracy", "within",
                                                             threshold=1.0, over=("a", "b", "c"))])


@pytest.mark.parametrize("paper", ["opal", "hedgemamba", "lia_mtr"])
def test_every_row_names_a_margin_and_thresholds_of_the_report_config(paper):
    from importlib import import_module

    from relin.config.claims import Reached
    from relin.config.report import MARGINS, PreconditionsConfig

    for row in import_module(f"relin.config.{paper}").CLAIMS:
        assert not row.margin or row.margin in MARGINS, row
        assert all(c.margin in MARGINS for c in row.clauses if isinstance(c, Apart)), row
        assert all(p.margin in MARGINS for p in row.preconditions if isinstance(p, AboveChance)
                   and isinstance(p.margin, str)), row
        assert all(not isinstance(p.needed, str) or p.needed in PreconditionsConfig.__dataclass_fields__
                   for p in row.preconditions if isinstance(p, Reached)), row
