import pytest
import torch

from relin.config.eval import EvalConfig
from relin.errors import ConfigError
from relin.eval.generation import continuations
from relin.eval.lm import evaluate_lm

from .helpers import LogitsModel, answer_generator


def _tasks(dataset, *tasks):
    return dataset.filter(lambda r: r["task"] in tasks)


def test_niah_gold_continuations_score_one(dataset, rows, tokenizer, encoder):
    niah = _tasks(dataset, "niah_single", "niah_multiquery")
    result = evaluate_lm(LogitsModel(len(tokenizer)), niah, tokenizer, EvalConfig(), name="gold",
                         generator=answer_generator(rows, encoder))
    assert result.metrics()["accuracy"] == {"niah_multiquery": 1.0, "niah_single": 1.0}


def test_niah_string_match_counts_each_gold_value(dataset, rows, tokenizer, encoder):
    """Only the first of two multi-query values is generated: half of the values match."""
    niah = _tasks(dataset, "niah_single", "niah_multiquery")
    result = evaluate_lm(LogitsModel(len(tokenizer)), niah, tokenizer, EvalConfig(), name="first",
                         generator=answer_generator(rows, encoder, lambda r: f"{r['answers'][0]} ."))
    assert result.metrics()["accuracy"] == {"niah_multiquery": 0.5, "niah_single": 1.0}


def test_niah_scores_group_by_length_and_depth(dataset, rows, tokenizer, encoder):
    niah = _tasks(dataset, "niah_single")
    result = evaluate_lm(LogitsModel(len(tokenizer)), niah, tokenizer, EvalConfig(), name="gold",
                         generator=answer_generator(rows, encoder))
    table = result.by_length_rows()
    lengths = sorted({r["length"] for r in rows if r["task"] == "niah_single"})
    assert [(r["length"], r["depth"], r["n"]) for r in table] == [(n, d, 1) for n in lengths for d in (0.0, 1.0)]
    assert set(result.metrics()["accuracy_by_length"]["niah_single"]) == {str(n) for n in lengths}


def test_arithmetic_exact_match_of_final_answer(dataset, rows, tokenizer, encoder):
    arithmetic = _tasks(dataset, "arithmetic")
    rows = [r for r in rows if r["task"] == "arithmetic"]
    right = evaluate_lm(LogitsModel(len(tokenizer)), arithmetic, tokenizer, EvalConfig(), name="right",
                        generator=answer_generator(rows, encoder, lambda r: f"{r['answer']}. and more"))
    wrong = evaluate_lm(LogitsModel(len(tokenizer)), arithmetic, tokenizer, EvalConfig(), name="wrong",
                        generator=answer_generator(rows, encoder, lambda r: f"{int(r['answer']) + 1}"))
    assert right.metrics()["accuracy"] == {"arithmetic": 1.0}
    assert wrong.metrics()["accuracy"] == {"arithmetic": 0.0}


def test_max_new_tokens_shorter_than_an_answer_is_a_config_error(dataset, rows, tokenizer, encoder):
    niah = _tasks(dataset, "niah_multiquery")
    with pytest.raises(ConfigError, match="eval.max_new_tokens"):
        evaluate_lm(LogitsModel(len(tokenizer)), niah, tokenizer, EvalConfig(max_new_tokens=2), name="short",
                    generator=answer_generator(rows, encoder))


def test_continuations_batch_equal_lengths_and_stop_at_eos():
    eos, seen = 2, []

    def generator(prompts: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        seen.append(prompts.shape)
        reply = torch.tensor([7, 8, eos, 9])[:max_new_tokens]
        return (prompts[:, :1] + reply).clamp(max=99).where(reply != eos, torch.tensor(eos))

    prompts = [[1, 5], [1, 6, 6], [1, 4], [1, 3, 3]]
    out = continuations(generator, prompts, max_new_tokens=4, batch_size=8, eos_token_id=eos)
    assert sorted(seen) == [torch.Size([2, 2]), torch.Size([2, 3])]
    assert out == [[8, 9], [8, 9], [8, 9], [8, 9]]
