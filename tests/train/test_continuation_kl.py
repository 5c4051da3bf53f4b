"""The per-token KL to the teacher on its own continuations of held-out list prompts (OPAL's training stages write it
to train_metrics.json): zero for the teacher itself, positive for another model, read over exactly the tokens the
teacher generated up to its eos; the continuations, generated once, are the teacher's greedy tokens, and a file of
other prompts is refused."""
import copy

import numpy as np
import pytest
import torch

from relin.config.teacher import TeacherModelConfig
from relin.data.lists import generate_lists, item_words, list_words
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.errors import InputError
from relin.io import atomic_write_json
from relin.models.convert.opal import convert
from relin.models.teachers import build_teacher
from relin.stages.opal._continuation_kl import (
    _kl_sum,
    continuation_kl,
    prompts_digest,
    read_continuations,
    teacher_continuations,
)

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
    continued = teacher_continuations(teacher, rows, tokenizer.eos_token_id, tokenizer.pad_token_id)
    assert {task: len(c) for task, c in continued.items()} == {"list_copy": 3, "list_reverse": 2}
    args = (rows, continued, tokenizer.pad_token_id)
    same = continuation_kl(teacher, copy.deepcopy(teacher), *args)
    assert set(same) == {"list_copy", "list_reverse"} and all(abs(v) < 1e-5 for v in same.values())
    student = convert(teacher, ["gdn", "gdn", "gdn", "attention"]).eval()
    other = continuation_kl(teacher, student, *args, batch_size=2)
    assert all(v > 1e-4 for v in other.values())
    copies = [r for r in rows if r["task"] == "list_copy"]
    assert continuation_kl(teacher, student, copies, continued, tokenizer.pad_token_id) == {"list_copy": pytest.approx(
        other["list_copy"], rel=1e-4)}, "per family, whatever the batch size"


def test_continuations_are_the_teachers_greedy_tokens_cut_after_its_eos(setup):
    """Each continuation is what greedy decoding of the prompt alone gives, up to the answer's length and eos."""
    from relin.eval.generation import continuations, greedy_generator
    from relin.eval.tasks import TASKS

    tokenizer, rows, teacher = setup
    continued = teacher_continuations(teacher, rows, tokenizer.eos_token_id, tokenizer.pad_token_id, batch_size=2)
    for task, generated in continued.items():
        for row, tokens in zip([r for r in rows if r["task"] == task], generated):
            [alone] = continuations(greedy_generator(teacher, tokenizer.eos_token_id, tokenizer.pad_token_id),
                                    [list(row["input_ids"][:row["prompt_len"]])], TASKS[task].budget(row), 1, None)
            alone = list(alone)
            cut = alone.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in alone else len(alone)
            assert tokens == alone[:cut] and 0 < len(tokens) <= TASKS[task].budget(row)


def test_continuations_of_other_prompts_are_refused_in_one_line(setup, tmp_path):
    tokenizer, rows, teacher = setup
    continued = teacher_continuations(teacher, rows, tokenizer.eos_token_id, tokenizer.pad_token_id)
    path = tmp_path / "teacher_continuations.json"
    atomic_write_json(path, {"prompts_sha256": prompts_digest(rows), "families": continued})
    assert read_continuations(path, rows, "data") == continued
    with pytest.raises(InputError, match=r"continuations of other prompts than the test split of data") as refused:
        read_continuations(path, rows[1:], "data")
    assert "\n" not in str(refused.value)


def test_the_kl_reads_each_continuation_token_once_right_padding_aside(setup):
    tokenizer, _, teacher = setup
    student = convert(teacher, ["gdn", "gdn", "gdn", "attention"]).eval()
    sequences = [([1, 5, 6, 7], [8, 9, 2]), ([1, 5], [6])]
    total, count = _kl_sum(teacher, student, sequences, tokenizer.pad_token_id, torch.device("cpu"))
    assert count == 4
    alone = [_kl_sum(teacher, student, [s], tokenizer.pad_token_id, torch.device("cpu")) for s in sequences]
    assert total == pytest.approx(sum(k for k, _ in alone), rel=1e-4) and sum(n for _, n in alone) == count
