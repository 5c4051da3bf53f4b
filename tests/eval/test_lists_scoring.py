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


class _Oracle(torch.nn.Module):
    """Logits that predict, at every position, the next token of its input (so under teacher forcing the gold), but
    ``wrong(row_ids, t) -> token`` in place of it where that returns one."""

    def __init__(self, vocab_size: int, wrong=lambda ids, t: None):
        super().__init__()
        self.vocab_size, self.wrong = vocab_size, wrong

    def forward(self, input_ids: torch.Tensor, **_):
        from types import SimpleNamespace

        logits = torch.zeros(*input_ids.shape, self.vocab_size)
        for b, ids in enumerate(input_ids.tolist()):
            for t in range(len(ids) - 1):
                token = self.wrong(ids, t)
                logits[b, t, ids[t + 1] if token is None else token] = 1.0
        return SimpleNamespace(logits=logits)


def test_evaluation_scores_each_answer_exactly(list_rows, list_tokenizer):
    from datasets import Dataset

    data = Dataset.from_list(list_rows)
    assert all(TASKS[r["task"]].kind == "exact" for r in list_rows)
    prompts = {tuple(r["input_ids"]): r["prompt_len"] for r in list_rows}
    # eval.max_new_tokens is shorter than every answer: the list families read their own answers' lengths
    cfg = EvalConfig(max_new_tokens=2)
    right = evaluate_lm(_Oracle(len(list_tokenizer)), data, list_tokenizer, cfg, name="gold")

    def fourth(ids, t):
        """The fourth answer token of every row (of every other row with ``half``) predicted as another one."""
        return (ids[t + 1] + 1) % len(list_tokenizer) if t == prompts[tuple(ids)] + 2 else None

    wrong = evaluate_lm(_Oracle(len(list_tokenizer), fourth), data, list_tokenizer, cfg, name="wrong")
    assert right.metrics()["accuracy"] == {"list_copy": 1.0, "list_reverse": 1.0}
    assert wrong.metrics()["accuracy"] == {"list_copy": 0.0, "list_reverse": 0.0}
    order = {tuple(r["input_ids"]): i for i, r in enumerate(list_rows)}
    half = evaluate_lm(_Oracle(len(list_tokenizer), lambda ids, t: None if order[tuple(ids)] % 2 else fourth(ids, t)),
                       data, list_tokenizer, cfg, name="half")
    assert half.metrics()["accuracy"] == {"list_copy": 0.5, "list_reverse": 0.5}
