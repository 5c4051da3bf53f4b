"""Contracts between the stages that write an artifact and those that read it: label conventions,
CSV columns, JSON keys. Writers and readers import them from here, never from each other."""
from __future__ import annotations

from typing import TypeVar

# Labels follow the Hugging Face causal-LM convention: ``labels[:, t]`` is the target of the token
# at position t; IGNORE_INDEX marks positions without one.
IGNORE_INDEX = -100

# ``metrics.json`` of ``relin eval-lm``: the keys a reader may rely on.
EVAL_KEYS = ("name", "perplexity", "accuracy", "accuracy_by_length")
# ``accuracy_by_length.csv`` of ``relin eval-lm``.
BY_LENGTH_COLUMNS = ("task", "length", "depth", "accuracy", "n")
# ``items.csv`` of ``relin eval-lm``: one row per evaluated example (the report's bootstrap resamples them).
# Task rows score ``hits`` of ``total``; perplexity passages carry their summed ``nll`` over ``tokens``.
ITEM_COLUMNS = ("task", "length", "depth", "needle_distance", "hits", "total", "nll", "tokens")
# ``history.csv`` of a training stage: the columns every history has (others follow the objective).
HISTORY_COLUMNS = ("step", "loss")
# ``speed.csv`` of ``relin opal-hybrid-speed``: one row per (model, context).
SPEED_COLUMNS = ("model", "context", "kv_bytes", "state_bytes", "cache_bytes")
# Decode timings of relin opal-hybrid-speed: they measure the machine, so they go to MLflow, not to speed.csv /
# speed.json.
DECODE_TIMING_KEYS = ("ms_per_step", "tokens_per_s")
# Per-step values that measure the machine, not the model: logged to MLflow, never written to history.csv.
TIMING_COLUMNS = ("tokens_per_s", "elapsed_s")

T = TypeVar("T")


def next_token_pairs(logits: T, labels: T) -> tuple[T, T]:
    """Align predictions with targets: the prediction at position t (``logits[:, t]``, ``[B, T, V]``)
    is scored against ``labels[:, t + 1]``. Returns ``(logits[:, :-1], labels[:, 1:])``."""
    return logits[:, :-1], labels[:, 1:]
