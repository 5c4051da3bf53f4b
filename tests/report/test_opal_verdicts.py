"""The OPAL claims on hand-made item scores: recovery over the families the teacher masters, the SWA claim
beyond the window only, on-policy against the controls with paired intervals."""
import numpy as np
import pytest

from relin.report.lm_scores import ItemScores, ModelItems
from relin.report.opal import OpalSettings, claims, table4
from relin.report.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_TESTABLE, REPRODUCED, WITHIN_NOISE

FAMILIES = ("niah_single", "niah_multikey", "niah_multiquery", "arithmetic")
N = 80  # items per family
# A teacher whose mix held no NIAH rows (the paper's protocol): every needle family is zero-shot for it too.
SETTINGS = OpalSettings(teacher="teacher-qwen3", swa_window=32, niah_protocol="zero_shot", mastery=0.8)
# An 8-layer teacher under the paper's rule: attention kept at layers 3 and 7 (Table 4's regime: two or more).
LAYERS = {"kept": [3, 7], "conversion_kl": [1.7, 3.2, 0.04, 0.05, 0.3, 0.2, 0.1, 0.06], "selection": "every_n"}


def _items(name, accuracy: dict[str, float], distance=None, seed=0, offset=0) -> ModelItems:
    """``N`` items per family, ``round(accuracy · N)`` right from item ``offset`` on; needles alternate near (8
    tokens back) and far (300: beyond the 8 x 32 tokens SWA's stacked windows reach)."""
    rng = np.random.default_rng(seed)
    task = np.array([f for f in FAMILIES for _ in range(N)] + ["filler"] * 10, dtype=object)
    right = np.arange(N) - offset
    hits = np.concatenate([((right >= 0) & (right < round(accuracy.get(f, 0.0) * N))).astype(float) for f in FAMILIES]
                          + [np.zeros(10)])
    if distance is None:
        distance = np.where(np.arange(len(task)) % 2 == 0, 8, 300)
    columns = {"task": task, "length": np.full(len(task), 128.0), "depth": np.zeros(len(task)),
               "needle_distance": np.asarray(distance, float), "hits": hits,
               "total": np.r_[np.ones(4 * N), np.zeros(10)], "nll": np.r_[np.zeros(4 * N), 30 + rng.random(10)],
               "tokens": np.r_[np.zeros(4 * N), np.full(10, 10.0)]}
    return ModelItems(name, columns, {f: 0.0 for f in FAMILIES}, f"{name}/items.csv")


def _claims(models, speed=None):
    scores = ItemScores(models, resamples=1000)
    return {c.claim.split(" (")[0].split(" at a")[0]: c for c in claims(scores, SETTINGS, speed, layers=LAYERS)}, scores


STRONG = {"niah_single": 1.0, "niah_multikey": 0.95, "niah_multiquery": 0.9, "arithmetic": 0.9}


def test_recovery_excludes_the_families_the_teacher_does_not_master():
    teacher = _items("teacher-qwen3", {**STRONG, "niah_multikey": 0.26})
    student = _items("opal-onpolicy", {"niah_single": 0.5, "niah_multikey": 0.26, "niah_multiquery": 0.45})
    found, scores = _claims([teacher, student])
    rec = scores.recovery("opal-onpolicy", "teacher-qwen3", FAMILIES[:3], 0.8)
    assert rec.families == ("niah_single", "niah_multiquery") and rec.excluded == {"niah_multikey": 0.2625}
    assert rec.estimate.value == pytest.approx(100 * (0.5 + 0.45) / (1.0 + 0.9))
    claim = found["The GDN hybrid after OPAL recovers the teacher's NIAH retrieval"]
    assert claim.verdict.outcome == NOT_TESTABLE, "the student recovers 0% of arithmetic, its training family"
    assert "niah_multikey (0.26)" in table4(scores, SETTINGS, ["opal-onpolicy"]).note


def test_a_teacher_that_masters_no_needle_family_makes_the_claim_not_testable():
    teacher = _items("teacher-qwen3", {"niah_single": 0.5, "arithmetic": 0.9})
    found, _ = _claims([teacher, _items("opal-onpolicy", {"niah_single": 0.5, "arithmetic": 0.9})])
    verdict = found["The GDN hybrid after OPAL recovers the teacher's NIAH retrieval"].verdict
    assert verdict.outcome == NOT_TESTABLE and "the teacher competent" in verdict.reason
    assert "niah_single 0.50" in verdict.reason


def test_a_student_that_did_not_learn_its_own_tasks_makes_the_niah_claim_not_testable():
    teacher = _items("teacher-qwen3", STRONG)
    found, _ = _claims([teacher, _items("opal-onpolicy", {"arithmetic": 0.45})])
    verdict = found["The GDN hybrid after OPAL recovers the teacher's NIAH retrieval"].verdict
    assert verdict.outcome == NOT_TESTABLE and "learned its training tasks" in verdict.reason
    assert "50% [" in verdict.reason, "the student's recovery on arithmetic, its training family here"


def test_the_niah_claim_reads_the_needles_the_students_never_trained_on():
    """Issue 62: the paper's setting guarantees that the students meet NIAH zero-shot; under the in-distribution
    protocol no family qualifies and the claim is not testable however well both models retrieve."""
    from dataclasses import replace

    scores = ItemScores([_items("teacher-qwen3", STRONG), _items("opal-onpolicy", STRONG)], resamples=200)
    claim = next(c for c in claims(scores, SETTINGS, None, layers=LAYERS) if "NIAH retrieval" in c.claim)
    assert claim.verdict.outcome == REPRODUCED, claim.verdict.reason
    seen = replace(SETTINGS, niah_protocol="in_distribution")
    claim = next(c for c in claims(scores, seen, None, layers=LAYERS) if "NIAH retrieval" in c.claim)
    assert claim.verdict.outcome == NOT_TESTABLE and "never trained on, with items" in claim.verdict.reason


@pytest.mark.parametrize("student, outcome", [(STRONG, REPRODUCED), ({"arithmetic": 0.9}, NOT_TESTABLE)])
def test_against_a_teacher_trained_on_the_needles_only_a_win_is_read(student, outcome):
    """A teacher whose mix trained the needles the students never saw is stronger than the paper's zero-shot one:
    a student reaching it is a win, one falling short of it says nothing."""
    from dataclasses import replace

    trained = replace(SETTINGS, teacher_trained=FAMILIES[:3])
    scores = ItemScores([_items("teacher-qwen3", STRONG), _items("opal-onpolicy", student)], resamples=200)
    claim = next(c for c in claims(scores, trained, None, layers=LAYERS) if "NIAH retrieval" in c.claim)
    assert claim.verdict.outcome == outcome, claim.verdict.reason
    assert "only a win can be read" in str(claim.preconditions[1])
    untrained = next(c for c in claims(scores, SETTINGS, None, layers=LAYERS) if "NIAH retrieval" in c.claim)
    assert untrained.verdict.outcome == (REPRODUCED if student is STRONG else CONTRADICTED)


def test_a_hybrid_keeping_one_attention_layer_makes_the_niah_claim_not_testable():
    """Issue #48: Table 4 is read on a hybrid that keeps at least two attention layers (the paper 9 of 36)."""
    scores = ItemScores([_items("teacher-qwen3", STRONG), _items("opal-onpolicy", STRONG)], resamples=200)
    one = {"kept": [3], "conversion_kl": [1.7, 3.2, 0.04, 0.05], "selection": "every_n"}
    for layers, reason in ((one, "attention layers the hybrid keeps ≥ 2"), (None, "no layer record")):
        claim = next(c for c in claims(scores, SETTINGS, None, layers=layers) if "NIAH retrieval" in c.claim)
        assert claim.verdict.outcome == NOT_TESTABLE and reason in claim.verdict.reason, claim.verdict.reason
    claim = next(c for c in claims(scores, SETTINGS, None, layers=LAYERS) if "NIAH retrieval" in c.claim)
    assert "[3, 7] of 8 (every_n)" in str(claim.preconditions[-1])


def test_the_swa_claim_scores_only_needles_beyond_its_stacked_reach():
    """Issue 62: SWA(32) on 8 layers carries a token 8 x 32 = 256 back; a needle 100 tokens back is beyond one
    window but within that reach, so it is not a needle SWA must lose."""
    teacher = _items("teacher-qwen3", STRONG)
    # SWA right exactly on the near needles (even items): 50% overall, 0% beyond its reach
    near = {f: 0.0 for f in FAMILIES}
    swa = _items("opal-swa", near)
    for f in range(3):
        swa.columns["hits"][f * N:(f + 1) * N] = (np.arange(N) % 2 == 0)
    found, _ = _claims([teacher, swa])
    claim = found["SWA collapses on NIAH beyond its reach"]
    assert claim.verdict.outcome == REPRODUCED and claim.ours.startswith("0% [0, 0]")
    within_reach = np.where(np.arange(4 * N + 10) % 2 == 0, 8, 100)     # beyond one window, within 8 of them
    models = [_items("teacher-qwen3", STRONG, distance=within_reach), _items("opal-swa", near, distance=within_reach)]
    verdict = _claims(models)[0]["SWA collapses on NIAH beyond its reach"].verdict
    assert verdict.outcome == NOT_TESTABLE and "needles beyond SWA's stacked reach (32 x 8 = 256 tokens)" in \
        verdict.reason


def _arm(model, accuracy, seeds=3, offset=0):
    """A model trained with ``seeds`` seeds (``<model>``, ``<model>-s1``, ...), each right on a shifted run of items."""
    return [_items(model + (f"-s{i}" if i else ""), {f: accuracy for f in FAMILIES}, offset=offset + i)
            for i in range(seeds)]


def _table3(onpolicy, control, parent=0.3, seeds=3, horizon=64, offset=0):
    from relin.report.inputs import NamedRows

    models = [_items("teacher-qwen3", STRONG), *_arm("opal-onpolicy", onpolicy, seeds),
              *_arm("opal-offpolicy_matched", control, seeds, offset), *_arm("opal-offpolicy_long", parent, seeds)]
    history = {"opal-onpolicy": NamedRows("opal-onpolicy", [{"step": 10, "horizon": 8}, {"step": 60,
                                                                                       "horizon": horizon}], "h.csv")}
    found = claims(ItemScores(models, resamples=1000), SETTINGS, None, history)
    return next(c for c in found if c.claim.startswith("On-policy beats off-policy on dataset text"))


@pytest.mark.parametrize("onpolicy, control, offset, outcome, reason", [
    (0.9, 0.5, 0, REPRODUCED, ""),
    (0.5, 0.9, 0, CONTRADICTED, "the other way round"),
    (0.7, 0.66, 3, INCONCLUSIVE, WITHIN_NOISE),
])
def test_onpolicy_against_a_control_is_judged_against_its_margin(onpolicy, control, offset, outcome, reason):
    claim = _table3(onpolicy, control, offset=offset)
    assert all(p.holds for p in claim.preconditions), claim.preconditions
    assert claim.seeds == 3 and claim.margin.value == 2.0
    assert claim.verdict.outcome == outcome and claim.verdict.reason.startswith(reason)


@pytest.mark.parametrize("change, named", [
    ({"horizon": 16}, "stage 3's rollout horizon ≥ 48 tokens: 16 tokens"),
    ({"seeds": 1}, "training seeds per arm (≥ 3): opal-onpolicy 1, opal-offpolicy_matched 1"),
    ({"onpolicy": 0.5, "control": 0.9, "parent": 0.5}, "stage 3 moved from its parent by more than 2 points (its "
                                                         "interval): opal-onpolicy +0 ["),
    ({"onpolicy": 0.0, "control": 0.0, "parent": 0.5}, "within 0.02 of chance 0: opal-onpolicy, "
                                                         "opal-offpolicy_matched"),
])
def test_table3_is_not_testable_when_the_run_could_not_show_it(change, named):
    claim = _table3(**{"onpolicy": 0.9, "control": 0.5, **change})
    assert claim.verdict.outcome == NOT_TESTABLE and named in claim.verdict.reason, claim.verdict.reason


def test_a_control_that_stays_at_its_parent_is_a_result_not_a_run_unable_to_show_it():
    claim = _table3(0.9, 0.5, parent=0.5)
    moved = next(p for p in claim.preconditions if "moved" in p.what)
    assert moved.holds and "(opal-offpolicy_matched +0 [" in moved.measured
    assert claim.verdict.outcome == REPRODUCED


def test_table3_reads_the_families_stage_3_prompts():
    """Under the zero-shot protocol stage 3 prompts no NIAH row (nor is filler a scored family), so with arithmetic
    its one scored family, a teacher that fails arithmetic leaves Table 3 not testable, whatever NIAH says."""
    from dataclasses import replace

    models = [_items("teacher-qwen3", {**STRONG, "arithmetic": 0.09}), *_arm("opal-onpolicy", 0.9),
              *_arm("opal-offpolicy_matched", 0.5)]
    prompts = replace(SETTINGS, prompt_tasks=("niah_single", "arithmetic", "filler"))
    found = claims(ItemScores(models, resamples=200), prompts, None, {})
    claim = next(c for c in found if c.claim.startswith("On-policy beats off-policy on dataset text"))
    assert claim.verdict.outcome == NOT_TESTABLE and "arithmetic 0.09" in claim.verdict.reason
    assert "niah_single" not in claim.verdict.reason


def _layers(kept, scores):
    return {"selection": "every_n", "kept": kept, "conversion_kl": scores}


def selection_claim(scores, layers):
    return next((c for c in claims(scores, SETTINGS, None, layers=layers) if c.claim.startswith("KL-guided")), None)


@pytest.mark.parametrize("kl_guided, every_n, outcome", [(0.9, 0.5, REPRODUCED), (0.5, 0.9, CONTRADICTED)])
def test_kl_guided_selection_is_judged_on_the_paired_difference_after_stage_1(kl_guided, every_n, outcome):
    models = [_items("teacher-qwen3", STRONG), *_arm("opal-align_kl_guided", kl_guided), *_arm("opal-align", every_n)]
    claim = selection_claim(ItemScores(models, resamples=1000), _layers([3], [0.9, 0.1, 0.2, 0.3]))
    assert claim.kind == "beyond" and claim.verdict.outcome == outcome and claim.ours.startswith("layers [0]: ")
    assert claim.claim == "KL-guided layer selection beats every_n after stage 1 at the same budget"


def test_kl_guided_selection_keeping_the_same_layers_is_not_testable():
    models = [_items("teacher-qwen3", STRONG), _items("opal-align_kl_guided", STRONG), _items("opal-align", {})]
    claim = selection_claim(ItemScores(models, resamples=100), _layers([3], [0.1, 0.2, 0.3, 0.9]))
    assert claim.verdict.outcome == NOT_TESTABLE and "keep different layers" in claim.verdict.reason
    assert selection_claim(ItemScores(models[:2], resamples=100), _layers([3], [0.1] * 4)) is None
    assert selection_claim(ItemScores(models, resamples=100), None) is None, "no layer record: nothing to compare"


def test_every_declared_opal_model_is_a_row_of_table4():
    from relin.config.opal import MODELS
    from relin.report.opal import name

    models = [_items("teacher-qwen3", STRONG), *(_items(name(m), {}) for m in MODELS)]
    scores = ItemScores(models, resamples=100)
    rows = [row[0] for row in table4(scores, SETTINGS, [name(m) for m in MODELS]).rows]
    assert rows[:len(MODELS) + 1] == ["teacher-qwen3", *(name(m) for m in MODELS)]


def test_the_teachers_trained_families_follow_their_mix():
    """niah_text never has train rows; a synthetic family is trained on when the teachers' mix gives it a positive
    weight and the data gives it train rows (an unlisted task weighs 1)."""
    from relin.config.data import NIAHConfig
    from relin.config.train import TrainConfig
    from relin.stages.report import teacher_trained

    niah = NIAHConfig()
    assert teacher_trained(niah, TrainConfig()) == ("niah_single", "niah_multikey", "niah_multiquery")
    assert teacher_trained(niah, TrainConfig(task_weights={"niah_single": 0.0, "mqar": 1.0})) == \
        ("niah_multikey", "niah_multiquery")
    assert teacher_trained(NIAHConfig(train_examples=0), TrainConfig()) == ()
