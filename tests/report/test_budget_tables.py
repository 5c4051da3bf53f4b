"""The budget tables of the OPAL and HedgeMamba sections: each trained model's steps and tokens beside the paper's for
its stage, as the paper writes them ("not stated" where it gives none), and ours / paper's where both exist."""
import pytest

from relin.config.opal import TRAINED
from relin.report import hedgemamba, opal
from relin.report.budgets import NOT_STATED
from relin.report.inputs import NamedJson
from relin.report.lm_scores import ItemScores
from relin.report.page import render_markdown

from . import test_hedgemamba_claims as hm
from . import test_opal_verdicts as ov


def _budget(run, steps, forward, target):
    return NamedJson(run, {"budget": {"optimizer_steps": steps, "forward_tokens": forward, "target_tokens": target}},
                     "train_metrics.json")


def _table(page: str, title: str) -> list[dict[str, str]]:
    """The rows of the Markdown table under ``### title`` as {column: cell}."""
    lines = page.split(f"### {title}\n", 1)[1].strip().splitlines()
    lines = lines[:next(i for i, line in enumerate(lines) if not line.startswith("|"))]
    columns = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(columns, (c.strip() for c in line.strip("|").split("|")))) for line in lines[2:]]


def test_every_trained_opal_model_has_the_papers_budget_for_its_stage():
    assert set(opal.PAPER_BUDGET) == set(TRAINED)


def test_the_opal_budgets_are_table_6s_qwen_columns_and_table_3s_matched_tokens():
    stages = ("align", "offpolicy_short", "offpolicy_long", "onpolicy")
    tokens, steps = (opal.PAPER_BUDGET[stages[0]].tokens.quote, opal.PAPER_BUDGET[stages[0]].steps.quote)
    assert [opal.PAPER_BUDGET[m].tokens.text() for m in stages] == tokens.excerpt.split()[1::2] == [
        "100M", "600M", "294M", "2B"]
    assert [opal.PAPER_BUDGET[m].steps.text() for m in stages] == steps.excerpt.split()[2::2]
    assert opal.PAPER_BUDGET["onpolicy"].tokens.value() == 2e9 and opal.PAPER_BUDGET["align"].steps.value() == 3100
    for control in ("offpolicy_matched", "offpolicy_teacher"):
        budget = opal.PAPER_BUDGET[control]
        assert budget.steps is None and budget.tokens.text() == "400M" and "400M" in budget.tokens.quote.excerpt
        assert budget.counts == "target_tokens", "Table 3's controls match the on-policy run's generated tokens"


def test_opal_section_sets_each_trained_models_budget_beside_the_papers(tmp_path):
    scores = ItemScores([ov._items("teacher-qwen3", ov.STRONG), *ov._arm("opal-onpolicy", 0.9, seeds=2),
                         *ov._arm("opal-offpolicy_matched", 0.5, seeds=1)], resamples=200)
    train = {"opal-align": _budget("opal-align", 31, 2_000_000, 12_000_000),
             "opal-offpolicy_short": _budget("opal-offpolicy_short", 287, 6_000_000, 5_900_000),
             "opal-onpolicy": _budget("opal-onpolicy", 120, 5_000_000, 4_000_000),
             "opal-onpolicy-s1": _budget("opal-onpolicy-s1", 999, 1, 1),
             "opal-offpolicy_matched": _budget("opal-offpolicy_matched", 120, 4_100_000, 4_000_000)}
    section, _ = opal.opal_section(scores, ov.SETTINGS, {}, train, None, {}, tmp_path, "figures", ov.LAYERS)
    rows = {r["model"]: r for r in _table(render_markdown("R", [section], []),
                                          "OPAL: every trained model's budget (first seed)")}
    assert list(rows) == ["stage 1: hidden-state alignment", "stage 2A: off-policy, short context",
                          "stage 3: on-policy (OPAL)", "control: off-policy on dataset text, stage 3's budget"]
    align, short, onpolicy, control = rows.values()
    assert (align["optimizer steps"], align["student forward tokens"], align["teacher-scored tokens"]) == (
        "31", "2000000", "12000000")
    assert (align["paper's optimizer steps"], align["paper's tokens"], align["paper's source"]) == (
        "3.1K", "100M", "Table 6, stage 1")
    assert align["steps ours / paper's"] == "0.01" and align["tokens ours / paper's"] == "0.02", "read tokens / 100M"
    assert short["steps ours / paper's"] == "1" and short["tokens ours / paper's"] == "0.01"
    assert onpolicy["optimizer steps"] == "120", "the first seed's budget, not a replica's"
    assert onpolicy["paper's tokens"] == "2B" and onpolicy["tokens ours / paper's"] == "0.002", "teacher-scored / 2B"
    assert control["paper's optimizer steps"] == NOT_STATED and control["steps ours / paper's"] == "–"
    assert control["paper's tokens"] == "400M" and control["tokens ours / paper's"] == "0.01"


def test_opal_section_without_budgets_has_no_budget_table(tmp_path):
    scores = ItemScores([ov._items("teacher-qwen3", ov.STRONG), *ov._arm("opal-onpolicy", 0.9, seeds=1)],
                        resamples=200)
    section, _ = opal.opal_section(scores, ov.SETTINGS, {}, {}, None, {}, tmp_path, "figures", ov.LAYERS)
    assert "every trained model's budget" not in render_markdown("R", [section], [])


def test_hedgemamba_budget_table_sets_tokens_in_all_beside_the_summaries_unconfirmed_10b(tmp_path):
    scores = ItemScores([hm._items("teacher-gpt_neox", 1.0, 1.8), hm._items("hedgemamba-finetune", 0.6, 2.0),
                         hm._items("hedgemamba-hedgehog", 0.5, 2.2), hm._items("hedgemamba-random", 0.1, 3.0)],
                        resamples=200)
    train = {"hedgemamba-hedgehog": _budget("hedgemamba-hedgehog", 100, 1_000_000, 4_000_000),
             "hedgemamba-finetune": _budget("hedgemamba-finetune", 160, 9_000_000, 9_000_000),
             "hedgemamba-random": _budget("hedgemamba-random", 160, 10_000_000, 10_000_000)}
    section, _ = hedgemamba.hedgemamba_section(scores, hm.SETTINGS, {}, None, {}, tmp_path, "figures", train=train)
    rows = _table(render_markdown("R", [section], []), "HedgeMamba: every arm's budget (first seed)")
    by_model = {r["model"].split(" (")[0].split(",")[0]: r for r in rows}
    stage1, finetune, random = by_model["Hedgehog"], by_model["HedgeMamba"], by_model["Mamba from random init"]
    assert stage1["paper's tokens"] == NOT_STATED and stage1["tokens ours / paper's"] == "–"
    assert finetune["tokens in all"] == "10000000" and finetune["paper's tokens"] == "10B [unconfirmed]"
    assert finetune["tokens ours / paper's"] == "0.001" and random["tokens ours / paper's"] == "0.001"
    assert all(r["paper's optimizer steps"] == NOT_STATED for r in rows)
    assert hedgemamba.PAPER_BUDGET.tokens.quote.seed is None, "no seed states HedgeMamba's budget"


@pytest.mark.parametrize("budget", [*opal.PAPER_BUDGET.values(), hedgemamba.PAPER_BUDGET])
def test_each_stated_budget_stands_in_its_quote_as_the_paper_writes_it(budget):
    for stated in (budget.steps, budget.tokens):
        if stated is not None:
            assert stated.text().removesuffix(" [unconfirmed]") in stated.quote.excerpt.split()
