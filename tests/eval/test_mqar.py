import pytest
import torch

from relin.config.eval import EvalConfig
from relin.eval.batches import equal_length_batches
from relin.eval.lm import evaluate_lm

from .helpers import LogitsModel, NextTokenOracle


def _mqar(dataset):
    return dataset.filter(lambda r: r["task"] == "mqar")


def test_oracle_scores_every_query(dataset, tokenizer):
    result = evaluate_lm(NextTokenOracle(len(tokenizer)), _mqar(dataset), tokenizer, EvalConfig(), name="oracle")
    metrics = result.metrics()
    assert metrics["accuracy"] == {"mqar": 1.0}
    assert metrics["n"] == {"mqar": 2}


def test_random_model_misses_most_queries(dataset, tokenizer):
    model = LogitsModel(len(tokenizer), torch.randn)
    result = evaluate_lm(model, _mqar(dataset), tokenizer, EvalConfig(), name="random")
    assert result.metrics()["accuracy"]["mqar"] < 0.5


def test_accuracy_pools_query_positions(dataset, tokenizer):
    """Two queries in one example and three in the other: 5 positions, each worth 1/5."""
    result = evaluate_lm(NextTokenOracle(len(tokenizer)), _mqar(dataset), tokenizer, EvalConfig(), name="oracle")
    assert sorted((s.hits, s.total) for s in result.scores) == [(2, 2), (3, 3)]


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_equal_length_batches_cover_every_index_once(batch_size):
    lengths = [5, 3, 5, 5, 3, 9, 5]
    batches = equal_length_batches(lengths, batch_size)
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert all(len({lengths[i] for i in b}) == 1 and len(b) <= batch_size for b in batches)
