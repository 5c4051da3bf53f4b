"""The OPAL claims on hand-made item scores: recovery over the families the teacher masters, the SWA claim
beyond the window only, on-policy against the controls with paired intervals."""
import numpy as np
import pytest

from relin.report.lm_scores import ItemScores, ModelItems
from relin.report.opal import OpalSettings, claims, selection_claim, table4
from relin.report.verdicts import AT_CHANCE, CONTRADICTED, INCONCLUSIVE, REFERENCE_FAILS, REPRODUCED, WITHIN_NOISE

FAMILIES = ("niah_single", "niah_multikey", "niah_multiquery", "arithmetic")
N = 80  # items per family
SETTINGS = OpalSettings(teacher="teacher-qwen3", swa_window=32, niah_protocol="zero_shot", mastery=0.8)


def _items(name, accuracy: dict[str, float], distance=None, seed=0, offset=0) -> ModelItems:
    """``N`` items per family, ``round(accuracy · N)`` right from item ``offset`` on; needles alternate near and
    far."""
    rng = np.random.default_rng(seed)
    task = np.array([f for f in FAMILIES for _ in range(N)] + ["filler"] * 10, dtype=object)
    right = np.arange(N) - offset
    hits = np.concatenate([((right >= 0) & (right < round(accuracy.get(f, 0.0) * N))).astype(float) for f in FAMILIES]
                          + [np.zeros(10)])
    if distance is None:
        distance = np.where(np.arange(len(task)) % 2 == 0, 8, 100)
    columns = {"task": task, "length": np.full(len(task), 128.0), "depth": np.zeros(len(task)),
               "needle_distance": np.asarray(distance, float), "hits": hits,
               "total": np.r_[np.ones(4 * N), np.zeros(10)], "nll": np.r_[np.zeros(4 * N), 30 + rng.random(10)],
               "tokens": np.r_[np.zeros(4 * N), np.full(10, 10.0)]}
    return ModelItems(name, columns, {f: 0.0 for f in FAMILIES}, f"{name}/items.csv")


def _claims(models, speed=None):
    scores = ItemScores(models, resamples=1000)
    return {c.claim.split(" (")[0].split(" at a")[0]: c for c in claims(scores, SETTINGS, speed)}, scores


STRONG = {"niah_single": 1.0, "niah_multikey": 0.95, "niah_multiquery": 0.9, "arithmetic": 0.9}


def test_recovery_excludes_the_families_the_teacher_does_not_master():
    teacher = _items("teacher-qwen3", {**STRONG, "niah_multikey": 0.26})
    student = _items("opal-onpolicy", {"niah_single": 0.5, "niah_multikey": 0.26, "niah_multiquery": 0.45})
    found, scores = _claims([teacher, student])
    rec = scores.recovery("opal-onpolicy", "teacher-qwen3", FAMILIES[:3], 0.8)
    assert rec.families == ("niah_single", "niah_multiquery") and rec.excluded == {"niah_multikey": 0.2625}
    assert rec.estimate.value == pytest.approx(100 * (0.5 + 0.45) / (1.0 + 0.9))
    claim = found["The GDN hybrid after OPAL recovers the teacher's NIAH retrieval"]
    assert claim.verdict.outcome == CONTRADICTED, "half of the teacher, clearly below 90%"
    assert "niah_multikey (0.26)" in table4(scores, SETTINGS, ["opal-onpolicy"]).note


def test_a_teacher_that_masters_no_needle_family_leaves_the_claim_inconclusive():
    teacher = _items("teacher-qwen3", {"niah_single": 0.5, "arithmetic": 0.9})
    found, _ = _claims([teacher, _items("opal-onpolicy", {"niah_single": 0.5})])
    verdict = found["The GDN hybrid after OPAL recovers the teacher's NIAH retrieval"].verdict
    assert verdict.outcome == INCONCLUSIVE and verdict.reason.startswith(REFERENCE_FAILS)


def test_the_swa_claim_scores_only_needles_beyond_the_window():
    teacher = _items("teacher-qwen3", STRONG)
    # SWA right exactly on the near needles (even items): 50% overall, 0% beyond the window
    near = {f: 0.0 for f in FAMILIES}
    swa = _items("opal-swa", near)
    for f in range(3):
        swa.columns["hits"][f * N:(f + 1) * N] = (np.arange(N) % 2 == 0)
    found, _ = _claims([teacher, swa])
    claim = found["SWA collapses on NIAH beyond its window"]
    assert claim.verdict.outcome == REPRODUCED and claim.ours.startswith("0% [0, 0]")
    close = np.full(4 * N + 10, 4)  # every needle inside the window
    models = [_items("teacher-qwen3", STRONG, distance=close), _items("opal-swa", near, distance=close)]
    verdict = _claims(models)[0]["SWA collapses on NIAH beyond its window"].verdict
    assert verdict.outcome == INCONCLUSIVE and "not testable" in verdict.reason


@pytest.mark.parametrize("onpolicy, control, offset, outcome, reason", [
    (0.9, 0.5, 0, REPRODUCED, ""),
    (0.5, 0.9, 0, CONTRADICTED, ""),
    (0.7, 0.6875, 3, INCONCLUSIVE, WITHIN_NOISE),  # 3 items right only for on-policy, 2 only for the control
    (0.0, 0.0, 0, INCONCLUSIVE, AT_CHANCE),
])
def test_onpolicy_against_a_control_needs_its_interval_clear_of_zero(onpolicy, control, offset, outcome, reason):
    teacher = _items("teacher-qwen3", STRONG)
    models = [teacher, _items("opal-onpolicy", {f: onpolicy for f in FAMILIES}),
              _items("opal-offpolicy_matched", {f: control for f in FAMILIES}, offset=offset)]
    verdict = _claims(models)[0]["On-policy beats off-policy on dataset text"].verdict
    assert verdict.outcome == outcome and verdict.reason.startswith(reason)


def _layers(kept, scores):
    return {"selection": "every_n", "kept": kept, "conversion_kl": scores}


@pytest.mark.parametrize("kl_guided, every_n, outcome", [(0.9, 0.5, REPRODUCED), (0.5, 0.9, CONTRADICTED)])
def test_kl_guided_selection_is_judged_on_the_paired_difference_after_stage_1(kl_guided, every_n, outcome):
    models = [_items("teacher-qwen3", STRONG), _items("opal-align_kl_guided", {f: kl_guided for f in FAMILIES}),
              _items("opal-align", {f: every_n for f in FAMILIES})]
    claim = selection_claim(ItemScores(models, resamples=1000), SETTINGS, _layers([3], [0.9, 0.1, 0.2, 0.3]))
    assert claim.verdict.outcome == outcome and claim.ours.startswith("layers [0]: ")


def test_kl_guided_selection_keeping_the_same_layers_is_not_testable():
    models = [_items("teacher-qwen3", STRONG), _items("opal-align_kl_guided", STRONG), _items("opal-align", {})]
    claim = selection_claim(ItemScores(models, resamples=100), SETTINGS, _layers([3], [0.1, 0.2, 0.3, 0.9]))
    assert claim.verdict.outcome == INCONCLUSIVE and "not testable" in claim.verdict.reason
    assert selection_claim(ItemScores(models[:2], resamples=100), SETTINGS, _layers([3], [0.1] * 4)) is None


def test_every_declared_opal_model_is_a_row_of_table4():
    from relin.config.opal import MODELS
    from relin.report.opal import name

    models = [_items("teacher-qwen3", STRONG), *(_items(name(m), {}) for m in MODELS)]
    scores = ItemScores(models, resamples=100)
    rows = [row[0] for row in table4(scores, SETTINGS, [name(m) for m in MODELS]).rows]
    assert rows[:len(MODELS) + 1] == ["teacher-qwen3", *(name(m) for m in MODELS)]
