"""OPAL's Table 3 on the list family: the teacher must generate it (≥ 90% exact), the table shows each arm's distance
from stage 2B, stage 3's rollouts (horizon, lengths, the sampling/training log-prob gap) and the row lengths 2A and 2B
drew."""
from dataclasses import replace

import numpy as np
import pytest

from relin.report.inputs import NamedJson, NamedRows
from relin.report.lm_scores import ItemScores, ModelItems
from relin.report.opal import OpalSettings, claims, horizon_reached, rollouts_table, row_lengths_table, table3, table4
from relin.report.verdicts import NOT_TESTABLE, REPRODUCED

FAMILIES = ("niah_single", "arithmetic", "list_copy")
N = 80
SETTINGS = OpalSettings(teacher="teacher-qwen3", swa_window=32, niah_protocol="zero_shot", mastery=0.8,
                        prompt_tasks=("list_copy",))


def _items(name, accuracy: dict[str, float], offset=0) -> ModelItems:
    task = np.array([f for f in FAMILIES for _ in range(N)] + ["text"] * 4, dtype=object)
    right = np.arange(N) - offset
    hits = np.concatenate([((right >= 0) & (right < round(accuracy.get(f, 0.0) * N))).astype(float)
                           for f in FAMILIES] + [np.zeros(4)])
    size = len(task)
    columns = {"task": task, "length": np.full(size, 128.0), "depth": np.zeros(size),
               "needle_distance": np.full(size, -1.0), "hits": hits, "total": np.r_[np.ones(3 * N), np.zeros(4)],
               "nll": np.r_[np.zeros(3 * N), np.full(4, 20.0)], "tokens": np.r_[np.zeros(3 * N), np.full(4, 10.0)]}
    return ModelItems(name, columns, {f: 0.0 for f in FAMILIES}, f"{name}/items.csv")


def _arm(model, accuracy, seeds=3, offset=0):
    return [_items(model + (f"-s{i}" if i else ""), {"list_copy": accuracy, "arithmetic": 0.5}, offset + i)
            for i in range(seeds)]


def _metrics(model, horizons=None, kl=None, **budget):
    return NamedJson(model, {"budget": {"optimizer_steps": 40, "forward_tokens": 1000, "target_tokens": 500,
                                        **({"horizons": horizons} if horizons else {}), **budget},
                             **({"teacher_continuation_kl": {"list_copy": kl}} if kl is not None else {})}, "m.json")


def _run(teacher_list=1.0, onpolicy=0.9, control=0.5, parent=0.3):
    models = [_items("teacher-qwen3", {"niah_single": 1.0, "arithmetic": 0.9, "list_copy": teacher_list}),
              *_arm("opal-onpolicy", onpolicy), *_arm("opal-offpolicy_matched", control),
              *_arm("opal-offpolicy_long", parent, seeds=1)]
    history = {"opal-onpolicy": NamedRows("opal-onpolicy", [
        {"step": 10, "horizon": 16, "rollout_len_mean": 15.0, "rollout_len_max": 16, "logprob_gap_mean": 1e-6,
         "logprob_gap_max": 3e-5, "logprob_gap_seq_max": 2e-4},
        {"step": 40, "horizon": 51.2, "rollout_len_mean": 45.0, "rollout_len_max": 49, "logprob_gap_mean": 3e-6,
         "logprob_gap_max": 5e-5, "logprob_gap_seq_max": 4e-4}], "h.csv")}
    train = {"opal-onpolicy": _metrics("opal-onpolicy", [16] * 20 + [32] * 12 + [64] * 8, kl=0.2),
             "opal-onpolicy-s1": _metrics("opal-onpolicy-s1", kl=0.4),
             "opal-offpolicy_matched": _metrics("opal-offpolicy_matched"),
             "opal-offpolicy_long": _metrics("opal-offpolicy_long", kl=1.5)}
    scores = ItemScores(models, resamples=500)
    found = claims(scores, SETTINGS, None, history, train)
    return scores, history, train, next(c for c in found if c.claim.startswith("On-policy beats off-policy on dataset"))


def test_table3_is_judged_on_the_list_family_the_teacher_generates():
    _, _, _, claim = _run()
    assert claim.verdict.outcome == REPRODUCED, claim.preconditions
    assert "over list_copy" in claim.ours and all(p.holds for p in claim.preconditions)
    competent = claim.preconditions[0]
    assert "(≥ 0.9)" in competent.what and competent.measured == "list_copy 1.00"


def test_a_teacher_below_90_percent_exact_leaves_table3_not_testable():
    _, _, _, claim = _run(teacher_list=0.85)
    assert claim.verdict.outcome == NOT_TESTABLE and "list_copy 0.85" in claim.verdict.reason


def test_the_horizon_reached_is_the_budgets_exact_one_not_a_logged_mean():
    _, history, train, claim = _run()
    assert horizon_reached(history, train) == 64.0 and horizon_reached(history) == 51.2
    assert any(p.measured == "64 tokens" for p in claim.preconditions)


def test_table3_shows_the_parent_each_arms_distance_from_it_and_the_family():
    scores, history, train, _ = _run()
    table = table3(scores, SETTINGS, train, history)
    assert table.columns[4:] == ["list_copy exact", "recovery %", "Δ from 2B (points)",
                                 "KL on the teacher's continuations"]
    parent, onpolicy, control = table.rows
    assert parent[0].endswith("(the arms' parent)") and parent[-2] is None and parent[-1] == 1.5
    assert onpolicy[-2].startswith("+60.0") and control[-2].startswith("+20.0")
    assert onpolicy[-1] == pytest.approx(0.3) and control[-1] is None, "the seeds' mean; none where not measured"
    assert "opal-onpolicy" not in table.note and "onpolicy 3" in table.note and "64 tokens" in table.note
    assert [c for c in table4(scores, SETTINGS, ["opal-onpolicy"]).columns if "list" in c] == ["list_copy"]


def test_rollouts_table_gives_the_horizon_lengths_and_the_log_prob_gap():
    _, history, train, _ = _run()
    table = rollouts_table(history, train)
    (row,) = table.rows
    assert row[:5] == ["opal-onpolicy", 64.0, 8, 30.0, 49]
    assert row[5] == np.mean([1e-6, 3e-6]) and row[6] == 5e-5 and row[7] == 4e-4
    assert rollouts_table({}, train) is None


def test_row_lengths_table_shows_what_2a_and_2b_drew():
    histograms = {"opal-offpolicy_short": {"9-16": {"rows": 30, "tokens": 300}, "65-128": {"rows": 10, "tokens": 1200}},
                  "opal-offpolicy_long": {"65-128": {"rows": 4, "tokens": 500}, "257-512": {"rows": 4, "tokens": 2000}}}
    train = {m: NamedJson(m, {"budget": {"row_lengths": h}}, "m.json") for m, h in histograms.items()}
    table = row_lengths_table(train)
    assert table.columns == ["stage", "rows", "9-16 tokens", "65-128 tokens", "257-512 tokens"]
    short, long = table.rows
    assert short[1:] == [40, "30 (20%)", "10 (80%)", None] and long[1:] == [8, None, "4 (20%)", "4 (80%)"]
    assert row_lengths_table({}) is None
    assert row_lengths_table({"opal-offpolicy_short": NamedJson("x", {"budget": {}}, "m.json")}) is None


def test_settings_without_list_prompts_keep_table3_on_its_prompt_families():
    scores, history, train, _ = _run()
    table = table3(scores, replace(SETTINGS, prompt_tasks=("arithmetic",)), train, history)
    assert table.columns[4] == "arithmetic exact"
