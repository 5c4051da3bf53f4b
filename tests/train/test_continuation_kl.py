"""The per-token KL to the teacher on its own continuations of held-out list prompts (OPAL's training stages write it
to train_metrics.json): zero for the teacher itself, positive for another model, read over exactly the tokens the
teacher generated up to its eos."""
import copy

import numpy as np
import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.data.lists import generate_lists, item_words, list_words
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.models.convert.opal import convert
from relin.models.teachers import build_teacher
from relin.stages.opal._continuation_kl import _kl_sum, continuation_kl

TEACHER = TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                             num_key_value_heads=2, head_dim=16, intermediate_size=64)


@pytest.fixture(scope="module")
def setup():
    tokenizer = build_tokenizer("word", list_words(16))
    encoder = WordEncoder(tokenizer)
    rng = np.random.default_rng(0)
    rows = [*generate_lists("copy", 3, 6, 6, item_words(16), encoder, rng),
            *generate_lists("reverse", 2, 4, 5, item_words(16), encoder, rng)]
    teacher = build_teacher(TEACHER, tokenizer, seed=0).eval()
    return tokenizer, rows, teacher


def test_the_teacher_against_itself_is_zero_and_a_student_is_not(setup):
    tokenizer, rows, teacher = setup
    args = (rows, tokenizer.eos_token_id, tokenizer.pad_token_id)
    same = continuation_kl(teacher, copy.deepcopy(teacher), *args)
    assert set(same) == {"list_copy", "list_reverse"} and all(abs(v) < 1e-5 for v in same.values())
    student = convert(teacher, ["gdn", "gdn", "gdn", "attention"]).eval()
    other = continuation_kl(teacher, student, *args, batch_size=2)
    assert all(v > 1e-4 for v in other.values())
    assert continuation_kl(teacher, student, [r for r in rows if r["task"] == "list_copy"],
                           tokenizer.eos_token_id, tokenizer.pad_token_id) == {"list_copy": pytest.approx(
                               other["list_copy"], rel=1e-4)}, "per family, whatever the batch size"


def test_the_kl_reads_each_continuation_token_once_right_padding_aside(setup):
    tokenizer, _, teacher = setup
    student = convert(teacher, ["gdn", "gdn", "gdn", "attention"]).eval()
    sequences = [([1, 5, 6, 7], [8, 9, 2]), ([1, 5], [6])]
    total, count = _kl_sum(teacher, student, sequences, tokenizer.pad_token_id, torch.device("cpu"))
    assert count == 4
    alone = [_kl_sum(teacher, student, [s], tokenizer.pad_token_id, torch.device("cpu")) for s in sequences]
    assert total == pytest.approx(sum(k for k, _ in alone), rel=1e-4) and sum(n for _, n in alone) == count
