"""OPAL stage 3's pieces: the horizon doubles exactly when the KL plateaus, rollouts put targets on
the sampled tokens only and are reproducible per step, the KL by position adds up, and the log-prob gap
between the sampling and training paths is logged per step from the loss's own forward."""
import copy

import pytest
import torch

from relin.artifacts import IGNORE_INDEX
from relin.config.teacher import TeacherModelConfig
from relin.config.train import TrainConfig
from relin.models.convert.opal import convert
from relin.models.logprob_gap import rollout_logprob_gap
from relin.models.teachers import build_teacher
from relin.train.curriculum import HorizonCurriculum
from relin.train.loop import train
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


def _rollouts(tokenizer, student, horizon=6, seed=0, **kwargs):
    rows = toy_rows(tokenizer, 64, seed=5)
    prompts = {"mqar": [r["input_ids"][:r["prompt_len"]] for r in rows]}
    return OnPolicyRollouts(student, prompts, {"mqar": 1.0}, 5, HorizonCurriculum(horizon, 4 * horizon),
                            eos_id=tokenizer.eos_token_id, pad_id=tokenizer.pad_token_id, seed=seed, **kwargs)


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
    lengths = (other["labels"] != IGNORE_INDEX).sum(1).tolist()  # each rollout's tokens, its eos included
    assert logged == {"horizon": 6, "rollout_len_mean": sum(lengths) / len(lengths), "rollout_len_max": max(lengths)}
    assert source.observe(5, {"kl": 0.3}) == {"horizon": 6}, "a step not rolled out here logs no lengths"
    assert source.budget() == {"rollout_tokens": source.generated_tokens, "horizons": [6, 6]}


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


def test_rollouts_carry_the_samplers_logprobs_and_the_objective_logs_the_gap(tokenizer, models):
    """The sampler's log-probs sit at their tokens' positions; the objective's gap, read from its own forward,
    equals :func:`relin.models.logprob_gap.rollout_logprob_gap`'s separate teacher-forced forward, and is fp32
    rounding (the GDN student's recurrent and chunk paths agree)."""
    teacher, student = models
    source = _rollouts(tokenizer, student, horizon=12, logprobs=True)
    (batch,) = source.micro_batches(2, 1)
    (plain,) = _rollouts(tokenizer, student, horizon=12).micro_batches(2, 1)
    assert "sampled_logprobs" not in plain and all(torch.equal(plain[k], batch[k]) for k in plain), \
        "keeping the log-probs changes no draw"
    targets = batch["labels"] != IGNORE_INDEX
    assert (batch["sampled_logprobs"][targets] < 0).all() and (batch["sampled_logprobs"][~targets] == 0).all()

    objective = OnPolicyDistillation(FrozenTeacher(teacher))
    out = objective(student, batch)
    count = objective.count_targets(batch)
    metrics = objective.finalize({**{k: float(v) / count for k, v in out.sums.items()},
                                  **{k: float(v) for k, v in out.maxima.items()}})
    assert not any(k.startswith("logprob_gap_seq/") for k in metrics)

    rows = []
    for ids, lab, sampled in zip(batch["input_ids"], batch["labels"], batch["sampled_logprobs"]):
        keep = lab != IGNORE_INDEX
        prompt = int(keep.nonzero().min())
        rows.append(rollout_logprob_gap(student, ids[None, :prompt], ids[None, keep], sampled[None, keep]))
    tokens = sum(r.tokens for r in rows)
    assert tokens == count
    assert metrics["logprob_gap_mean"] == pytest.approx(sum(r.mean * r.tokens for r in rows) / tokens, abs=2e-7)
    assert metrics["logprob_gap_max"] == pytest.approx(max(r.max for r in rows), abs=5e-7)
    assert metrics["logprob_gap_seq_mean"] == pytest.approx(sum(r.seq_mean for r in rows) / len(rows), abs=1e-6)
    assert metrics["logprob_gap_seq_max"] == pytest.approx(max(r.seq_max for r in rows), abs=1e-6)
    assert 0 < metrics["logprob_gap_max"] <= 1e-5 and metrics["logprob_gap_seq_max"] <= 1e-4


def test_a_rollout_reaches_the_horizon_when_the_student_never_ends(tokenizer, models):
    """Every row of a step holds ``horizon`` sampled targets when eos never comes (it is masked out)."""
    _, student = models
    never = torch.zeros(len(tokenizer))
    never[tokenizer.eos_token_id] = float("-inf")
    handle = student.lm_head.register_forward_hook(lambda module, args, logits: logits + never)
    try:
        (batch,) = _rollouts(tokenizer, student, horizon=20, logprobs=True).micro_batches(1, 1)
    finally:
        handle.remove()
    assert ((batch["labels"] != IGNORE_INDEX).sum(-1) == 20).all()
    assert (batch["sampled_logprobs"] < 0).sum() == 5 * 20


def test_the_loop_logs_the_gap_and_takes_maxima_over_micro_batches_and_steps(tokenizer, models, tmp_path):
    """Through :func:`relin.train.loop.train`: the gap metrics reach the history; a ``_max`` metric is the
    largest of the step's micro-batches and, in a logged row, of the interval's steps."""
    teacher, student = models
    student = copy.deepcopy(student)
    source = _rollouts(tokenizer, student, horizon=6, logprobs=True)
    seen = []

    class Recording(OnPolicyDistillation):
        def __call__(self, model, batch):
            out = super().__call__(model, batch)
            seen.append(float(out.maxima["logprob_gap_max"]))
            return out

    cfg = TrainConfig(steps=2, batch_size=5, grad_accum=2, lr=1e-4, warmup_steps=0, log_every=2,
                      checkpoint_every=100)
    result = train(student, Recording(FrozenTeacher(teacher)), source, cfg, checkpoint_root=tmp_path,
                   progress=False)
    (row,) = result.history
    assert {"logprob_gap_mean", "logprob_gap_max", "logprob_gap_seq_mean", "logprob_gap_seq_max", "horizon"} <= set(row)
    assert len(seen) == 4 and row["logprob_gap_max"] == pytest.approx(max(seen), rel=1e-6)
