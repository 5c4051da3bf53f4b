import pytest
import torch

from relin.config.train import CurriculumStage
from relin.errors import ConfigError, InputError
from relin.train.batching import StepBatches

from .toydata import toy_rows


def _batches(tokenizer, **kwargs):
    rows = toy_rows(tokenizer, 200, seed=3, pairs=(2, 3, 5))
    return StepBatches([r["input_ids"] for r in rows], [r["labels"] for r in rows],
                       pad_id=tokenizer.pad_token_id, **{"batch_size": 8, **kwargs})


def test_batches_are_padded_masked_and_reproducible_per_step(tokenizer):
    batches = _batches(tokenizer, seed=5)
    first = batches.micro_batches(step=7, count=2)
    again = _batches(tokenizer, seed=5).micro_batches(step=7, count=2)
    for a, b in zip(first, again):
        assert all(torch.equal(a[k], b[k]) for k in a)
    batch = first[0]
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    pad = batch["attention_mask"] == 0
    assert (batch["input_ids"][pad] == tokenizer.pad_token_id).all()
    assert (batch["labels"][pad] == -100).all()
    other = batches.micro_batches(step=8, count=1)[0]
    assert not torch.equal(other["input_ids"][:, :5], batch["input_ids"][:, :5])


def test_curriculum_limits_length_until_its_last_step(tokenizer):
    batches = _batches(tokenizer, curriculum=[CurriculumStage(until_step=10, max_len=9),
                                              CurriculumStage(until_step=20, max_len=13)])
    assert [batches.max_len(s) for s in (1, 10, 11, 20, 21)] == [9, 9, 13, 13, 21]
    for step, limit in ((3, 9), (15, 13)):
        lengths = batches.micro_batches(step, 3)
        assert max(int(b["attention_mask"].sum(1).max()) for b in lengths) <= limit


def test_a_stage_batch_size_applies_to_its_steps_only(tokenizer):
    stages = [CurriculumStage(until_step=10, max_len=9, batch_size=24), CurriculumStage(until_step=20, max_len=13)]
    batches = _batches(tokenizer, curriculum=stages)
    assert [batches.rows_per_micro_batch(s) for s in (1, 10, 11, 21)] == [24, 24, 8, 8]
    assert [len(b["input_ids"]) for b in batches.micro_batches(step=4, count=2)] == [24, 24]
    assert len(batches.micro_batches(step=15, count=1)[0]["input_ids"]) == 8
    # a stage batch size equal to the default draws exactly the default's rows
    same = _batches(tokenizer, curriculum=[CurriculumStage(until_step=10, max_len=9, batch_size=8)])
    plain = _batches(tokenizer, curriculum=[CurriculumStage(until_step=10, max_len=9)])
    assert torch.equal(same.micro_batches(4, 2)[1]["input_ids"], plain.micro_batches(4, 2)[1]["input_ids"])
    # ranks split the stage's larger draw as they split the plain one
    halves = [_batches(tokenizer, curriculum=stages, rank=r, world_size=2).micro_batches(4, 1)[0]["input_ids"]
              for r in (0, 1)]
    assert all(len(h) == 24 for h in halves)


def test_ranks_take_disjoint_slices_of_one_global_draw(tokenizer):
    whole = _batches(tokenizer, batch_size=8).micro_batches(4, 1)[0]
    parts = [_batches(tokenizer, batch_size=4, rank=r, world_size=2).micro_batches(4, 1)[0] for r in (0, 1)]
    seen = [row[row != tokenizer.pad_token_id].tolist() for row in whole["input_ids"]]
    got = [row[row != tokenizer.pad_token_id].tolist() for p in parts for row in p["input_ids"]]
    assert got == seen


def test_impossible_curriculum_and_ragged_rows_are_clear_errors(tokenizer):
    with pytest.raises(ConfigError, match="max_len=3"):
        _batches(tokenizer, curriculum=[CurriculumStage(until_step=5, max_len=3)])
    with pytest.raises(InputError, match="row 0"):
        StepBatches([[1, 2, 3]], [[1, 2]], batch_size=1, pad_id=0)


def test_length_buckets_keep_each_step_within_one_power_of_two(tokenizer):
    batches = _batches(tokenizer, bucket_by_length=True)
    widths = set()
    for step in range(1, 30):
        lengths = batches.micro_batches(step, 1)[0]["attention_mask"].sum(1)
        bucket = 1 << int(lengths.max() - 1).bit_length()
        assert (lengths > bucket // 2).all(), f"step {step}: rows of lengths {lengths.tolist()} share a batch"
        widths.add(bucket)
    assert widths == {16, 32}, "both buckets (9-13 and 21 tokens) get drawn"


def test_task_weights_steer_and_exclude_tasks(tokenizer):
    rows = toy_rows(tokenizer, 100, seed=4, pairs=(2,)) + toy_rows(tokenizer, 100, seed=5, pairs=(5,))
    tasks = ["short"] * 100 + ["long"] * 100
    batches = StepBatches([r["input_ids"] for r in rows], [r["labels"] for r in rows], batch_size=16,
                          pad_id=tokenizer.pad_token_id, tasks=tasks, task_weights={"long": 0.0})
    assert all(int(batches.micro_batches(s, 1)[0]["attention_mask"].sum(1).max()) == 9 for s in range(1, 10))
    with pytest.raises(ConfigError, match="no training rows of task\\(s\\) nope"):
        StepBatches([r["input_ids"] for r in rows], [r["labels"] for r in rows], batch_size=4, pad_id=0,
                    tasks=tasks, task_weights={"nope": 2.0})


def test_negative_task_weight_is_a_config_error():
    from relin.config.loader import build
    from relin.config.train import TrainConfig

    with pytest.raises(ConfigError, match=r"teacher.train.task_weights: expected weights >= 0.*mqar"):
        build(TrainConfig, {"task_weights": {"mqar": -1.0}}, "teacher.train")


def test_task_weights_set_the_mixture_whatever_the_row_counts(tokenizer):
    rows = toy_rows(tokenizer, 50, seed=6, pairs=(2,)) + toy_rows(tokenizer, 450, seed=7, pairs=(5,))
    tasks = ["few"] * 50 + ["many"] * 450
    batches = StepBatches([r["input_ids"] for r in rows], [r["labels"] for r in rows], batch_size=100,
                          pad_id=tokenizer.pad_token_id, tasks=tasks, task_weights={"few": 3.0})
    lengths = torch.cat([batches.micro_batches(s, 1)[0]["attention_mask"].sum(1) for s in range(1, 21)])
    share_few = (lengths == 9).float().mean().item()
    assert share_few == pytest.approx(0.75, abs=0.04), "3:1 weights give a 3:1 mixture despite 1:9 rows"


@pytest.mark.parametrize("targets", [1, 7, 50, 333])
def test_a_target_budget_batch_holds_exactly_its_targets_from_the_steps_rows(tokenizer, targets):
    from relin.train.batching import TargetBudget
    from relin.train.objectives import next_token_mask

    inner = _batches(tokenizer, seed=2)
    source = TargetBudget(inner, [targets, 2 * targets])
    for step, budget in ((1, targets), (2, 2 * targets)):
        (batch,) = source.micro_batches(step, 1)
        assert int(next_token_mask(batch, "all").sum()) == budget
        # the rows are the step's draws in order, each a prefix of its dataset row
        lengths = batch["attention_mask"].sum(1).tolist()
        drawn = inner._draw(step, len(lengths))
        for row, (i, n) in enumerate(zip(drawn, lengths)):
            assert batch["input_ids"][row, :n].tolist() == inner.rows[i][:n].tolist()
        assert all(n == inner.lengths[i] for i, n in zip(drawn[:-1], lengths[:-1]))
    with pytest.raises(ConfigError, match="one micro-batch"):
        source.micro_batches(1, 2)


def test_row_lengths_count_every_row_the_run_draws_by_power_of_two_bin(tokenizer):
    """The histogram a run of 2A/2B reports is the rows its micro-batches held (every rank's), binned; 2A's
    curriculum keeps it below its max_len."""
    from collections import Counter

    from relin.train.batching import RowLengths, length_bin

    assert [length_bin(n) for n in (1, 2, 16, 17, 100, 128, 129, 512)] == [
        "1-1", "2-2", "9-16", "17-32", "65-128", "65-128", "129-256", "257-512"]
    curriculum = [CurriculumStage(until_step=4, max_len=9)]
    source = RowLengths(_batches(tokenizer, curriculum=curriculum), steps=7, grad_accum=2)
    seen = Counter()
    for step in range(1, 8):
        for batch in source.micro_batches(step, 2):
            for n in batch["attention_mask"].sum(1).tolist():
                seen[length_bin(n)] += 1
                seen[length_bin(n), "tokens"] += n
    histogram = source.budget()["row_lengths"]
    assert histogram == {b: {"rows": seen[b], "tokens": seen[b, "tokens"]} for b in histogram}
    assert sum(c["rows"] for c in histogram.values()) == 7 * 2 * 8
    split = [RowLengths(_batches(tokenizer, curriculum=curriculum, rank=r, world_size=2), 7, 2) for r in (0, 1)]
    assert split[0].budget() == split[1].budget(), "every rank reports the run's rows"
    assert sum(c["rows"] for c in split[0].budget()["row_lengths"].values()) == 7 * 2 * 8 * 2
