import pytest
import torch

from relin.config import CurriculumStage
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
