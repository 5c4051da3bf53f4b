import math

import pytest

from relin.eval.perplexity import perplexity
from relin.eval.teacher_forced import LabelScore, score_labels

from .helpers import LogitsModel, NextTokenOracle


def _filler(rows):
    chosen = [r for r in rows if r["task"] == "filler"]
    return [r["input_ids"] for r in chosen], [r["labels"] for r in chosen]


def test_uniform_model_has_perplexity_equal_to_vocab_size(rows, tokenizer):
    ids, labels = _filler(rows)
    result = perplexity(score_labels(LogitsModel(len(tokenizer)), ids, labels, batch_size=2))
    assert result.value == pytest.approx(len(tokenizer), rel=1e-5)
    assert result.tokens == sum(len(x) - 1 for x in ids)


def test_oracle_model_has_perplexity_near_one(rows, tokenizer):
    ids, labels = _filler(rows)
    assert perplexity(score_labels(NextTokenOracle(len(tokenizer)), ids, labels, batch_size=8)).value < 1.001


def test_perplexity_weights_tokens_not_examples():
    scores = [LabelScore(nll=1.0, correct=0, count=1), LabelScore(nll=9.0, correct=0, count=3)]
    assert perplexity(scores).value == pytest.approx(math.exp(10.0 / 4))


def test_corpus_without_labels_has_no_perplexity():
    result = perplexity([])
    assert math.isnan(result.value) and result.tokens == 0
