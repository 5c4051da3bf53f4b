"""Arithmetic word problems: exact match of the final integer answer."""
from __future__ import annotations

from typing import Any

from ...data.arithmetic import parse_answer


def score(prediction: str, row: dict[str, Any]) -> float:
    """1.0 when the integer the continuation answers (:func:`~relin.data.arithmetic.parse_answer`)
    equals the gold answer, else 0.0."""
    return float(parse_answer(prediction) == int(row["answer"]))
