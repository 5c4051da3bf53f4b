"""Exact match of a greedy continuation, token by token (the walks, the lists and the digit copies: long generated
answers).

The continuation is compared in token ids, not decoded text: the gold is the row's supervised tokens (the answer's
items, then eos), and an answer scores 1 only when every one of its tokens is the gold's and it stops with eos
there. One wrong, missing or extra token scores 0, whatever the text it decodes to. A family a checkpoint answers
zero-shot (``digit_copy``) is scored on its answer alone (:func:`score_answer`): the checkpoint ends the line its own
way, which no prompt told it.
"""
from __future__ import annotations

from typing import Any, Sequence

from ...artifacts import IGNORE_INDEX


def gold_tokens(row: dict[str, Any]) -> list[int]:
    """The supervised tokens of a row after its prompt: the answer and its eos."""
    return [t for t in row["labels"][row["prompt_len"]:] if t != IGNORE_INDEX]


def budget(row: dict[str, Any]) -> int:
    """Tokens to generate for ``row``: its answer and eos (one more could only be wrong)."""
    return len(gold_tokens(row))


def score_tokens(generated: Sequence[int], row: dict[str, Any]) -> float:
    """1.0 when ``generated`` (the greedy tokens, uncut) begins with exactly the gold answer and its eos, else 0.0."""
    gold = gold_tokens(row)
    return float(list(generated[:len(gold)]) == gold)


def answer_budget(row: dict[str, Any]) -> int:
    """Tokens to generate for ``row`` scored on its answer alone: the answer without its eos."""
    return len(gold_tokens(row)) - 1


def score_answer(generated: Sequence[int], row: dict[str, Any]) -> float:
    """1.0 when ``generated`` begins with exactly the gold answer (its eos not required), else 0.0."""
    gold = gold_tokens(row)[:-1]
    return float(list(generated[:len(gold)]) == gold)
