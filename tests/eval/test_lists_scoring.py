"""The list families are scored by exact match in tokens: the gold answer and its eos score 1, one wrong, missing or
extra token anywhere scores 0."""
import numpy as np
import pytest
import torch

from relin.config.eval import EvalConfig
from relin.data.lists import generate_lists, item_words, list_words
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.eval.lm import evaluate_lm
from relin.eval.tasks import TASKS
from relin.eval.tasks.exact import budget, gold_tokens, score_tokens

from .helpers import LogitsModel


@pytest.fixture(scope="module")
def list_tokenizer():
    return build_tokenizer("word", list_words(16))


@pytest.fixture(scope="module")
def list_rows(list_tokenizer):
    encoder = WordEncoder(list_tokenizer)
    rng = np.random.default_rng(int(torch.randint(1 << 30, ())))
    return [*generate_lists("copy", 4, 10, 10, item_words(16), encoder, rng),
            *generate_lists("reverse", 4, 6, 10, item_words(16), encoder, rng)]


def test_gold_scores_one_and_every_single_wrong_token_zero(list_rows, list_tokenizer):
    eos = list_tokenizer.eos_token_id
    for row in list_rows:
        gold = gold_tokens(row)
        assert gold[-1] == eos and budget(row) == len(gold) == len(row["answer"].split()) + 1
        assert score_tokens(gold, row) == 1.0
        assert score_tokens(gold + [eos, eos], row) == 1.0  # what follows the answer's eos is never read
        for i in range(len(gold)):
            for wrong in {gold[(i + 1) % len(gold)], gold[i] + 1, eos} - {gold[i]}:
                assert score_tokens(gold[:i] + [wrong] + gold[i + 1:], row) == 0.0, (i, wrong)
        assert score_tokens(gold[:-1], row) == 0.0                       # no eos
        assert score_tokens(gold[:-1] + [gold[0], eos], row) == 0.0      # one item too many
        assert score_tokens(gold[:-2] + [eos], row) == 0.0               # one item short
        assert score_tokens([], row) == 0.0


def _replying(rows, reply):
    """A generator that continues each row's prompt with ``reply(row)`` (token ids), padded with eos."""
    replies = {tuple(r["input_ids"][:r["prompt_len"]]): reply(r) for r in rows}

    def run(prompts: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        out = torch.full((prompts.shape[0], max_new_tokens), -1, dtype=torch.long)
        for i, prompt in enumerate(prompts.tolist()):
            tokens = replies[tuple(prompt)][:max_new_tokens]
            out[i, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        return out

    return run


def test_evaluation_generates_each_answer_and_scores_it_exactly(list_rows, list_tokenizer):
    from datasets import Dataset

    data = Dataset.from_list(list_rows)
    assert all(TASKS[r["task"]].kind == "exact" for r in list_rows)
    model = LogitsModel(len(list_tokenizer))
    # eval.max_new_tokens is shorter than every answer: the list families generate their own answers' lengths
    cfg = EvalConfig(max_new_tokens=2)
    right = evaluate_lm(model, data, list_tokenizer, cfg, name="gold", generator=_replying(list_rows, gold_tokens))

    def one_wrong(row):
        gold = gold_tokens(row)
        return gold[:3] + [gold[4]] + gold[4:]

    wrong = evaluate_lm(model, data, list_tokenizer, cfg, name="wrong", generator=_replying(list_rows, one_wrong))
    assert right.metrics()["accuracy"] == {"list_copy": 1.0, "list_reverse": 1.0}
    assert wrong.metrics()["accuracy"] == {"list_copy": 0.0, "list_reverse": 0.0}
    half = evaluate_lm(model, data, list_tokenizer, cfg, name="half", generator=_replying(
        list_rows, lambda r: gold_tokens(r) if list_rows.index(r) % 2 else one_wrong(r)))
    assert half.metrics()["accuracy"] == {"list_copy": 0.5, "list_reverse": 0.5}
