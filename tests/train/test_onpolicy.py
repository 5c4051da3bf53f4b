"""OPAL stage 3's pieces: the horizon doubles exactly when the KL plateaus, rollouts put targets on
the sampled tokens only and are reproducible per step, and the KL by position adds up."""
import pytest
import torch

from relin.artifacts import IGNORE_INDEX
from relin.config.teacher import TeacherModelConfig
from relin.models.convert.opal import convert
from relin.models.teachers import build_teacher
from relin.train.curriculum import HorizonCurriculum
from relin.train.objectives import OnPolicyDistillation
from relin.train.objectives.onpolicy import bucket_label, position_bucket
from relin.train.rollouts import OnPolicyRollouts
from relin.train.teacher import FrozenTeacher

from .toydata import toy_rows

TEACHER = TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                             num_key_value_heads=2, head_dim=16, intermediate_size=64)


def test_horizon_doubles_exactly_when_the_gain_over_the_window_falls_below_the_threshold():
    c = HorizonCurriculum(initial=8, maximum=32, window=10, threshold=0.02)
    improving = [1.0 - 0.05 * i for i in range(10)]
    assert not any(c.observe(step, kl) for step, kl in enumerate(improving, 1))
    assert c.horizon == 8 and c.gain() == pytest.approx((0.975 - 0.575) / 0.975)   # first vs last 2 of 10
    # A plateau: the window fills with 0.5 from step 11; at step 20 it holds ten 0.5s, gain 0 < 2%.
    doubled = [step for step in range(11, 21) if c.observe(step, 0.5)]
    assert doubled == [20] and c.horizon == 16 and c.recent == [] and c.doublings == [20]
    # Just above the threshold no doubling: a 3% gain over the window.
    for step, kl in enumerate([1.0, 1.0] + [0.99] * 6 + [0.97, 0.97], 21):
        assert not c.observe(step, kl)
    assert c.horizon == 16 and c.gain() == pytest.approx(0.03)
    # One more step slides the window: first fifth (1.0, 0.99), last (0.97, 0.99), gain 1.5% < 2%.
    assert c.observe(31, 0.99) and c.horizon == 32
    assert not any(c.observe(s, 0.4) for s in range(32, 60)) and c.horizon == 32, "capped at the maximum"
    state = c.state_dict()
    again = HorizonCurriculum(initial=8, maximum=32, window=10)
    again.load_state_dict(state)
    assert again.state_dict() == state


def _rollouts(tokenizer, student, horizon=6, seed=0):
    rows = toy_rows(tokenizer, 64, seed=5)
    prompts = {"mqar": [r["input_ids"][:r["prompt_len"]] for r in rows]}
    return OnPolicyRollouts(student, prompts, {"mqar": 1.0}, 5, HorizonCurriculum(horizon, 4 * horizon),
                            eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, seed=seed)


@pytest.fixture(scope="module")
def models(tokenizer):
    teacher = build_teacher(TEACHER, tokenizer, seed=0).eval()
    return teacher, convert(teacher, ["gdn", "gdn", "gdn", "attention"])


def test_rollouts_target_the_sampled_tokens_and_repeat_per_step(tokenizer, models):
    _, student = models
    source = _rollouts(tokenizer, student)
    (batch,) = source.micro_batches(3, 1)
    (again,) = _rollouts(tokenizer, student).micro_batches(3, 1)
    assert all(torch.equal(batch[k], again[k]) for k in batch), "same step, same rollouts"
    (other,) = source.micro_batches(4, 1)
    assert not torch.equal(batch["input_ids"], other["input_ids"])
    for ids, labels, mask in zip(batch["input_ids"], batch["labels"], batch["attention_mask"]):
        targets = (labels != IGNORE_INDEX).nonzero().squeeze(-1)
        length = int(mask.sum())
        assert 1 <= len(targets) <= 6 and targets.max() == length - 1, "labels cover the continuation only"
        assert torch.equal(labels[targets], ids[targets])
        prompt = int(targets.min())
        assert (labels[:prompt] == IGNORE_INDEX).all()
    assert source.generated_tokens == int((batch["labels"] != IGNORE_INDEX).sum()) + \
        int((other["labels"] != IGNORE_INDEX).sum())
    logged = source.observe(4, {"kl": 0.3})
    assert logged == {"horizon": 6}
    assert source.budget() == {"rollout_tokens": source.generated_tokens, "horizons": [6]}


def test_kl_by_position_adds_up_to_the_total(tokenizer, models):
    teacher, student = models
    (batch,) = _rollouts(tokenizer, student, horizon=12).micro_batches(1, 1)
    objective = OnPolicyDistillation(FrozenTeacher(teacher))
    out = objective(student, batch)
    targets = objective.count_targets(batch)
    buckets = sum(v for k, v in out.sums.items() if k.startswith("kl_at/"))
    assert torch.allclose(buckets, out.sums["kl"]) and out.loss_sum > 0
    assert sum(v for k, v in out.sums.items() if k.startswith("tokens_at/")) == targets
    metrics = objective.finalize({k: float(v) / targets for k, v in out.sums.items()})
    assert "kl_at_position/1" in metrics and not any(k.startswith("tokens_at/") for k in metrics)


def test_position_buckets():
    offsets = torch.tensor([0, 1, 2, 3, 4, 7, 8, 100])
    assert position_bucket(offsets).tolist() == [0, 1, 2, 2, 3, 3, 4, 7]
    assert [bucket_label(b) for b in range(4)] == ["1", "2", "3-4", "5-8"]
