"""Needle in a haystack: RULER's ``string_match_all`` of the greedy continuation."""
from __future__ import annotations

from typing import Any

from ...data.niah import string_match_all


def score(prediction: str, row: dict[str, Any]) -> float:
    """Fraction of the gold needle values (``row["answers"]``) found in the prediction, in [0, 1]."""
    return string_match_all([prediction], [row["answers"]]) / 100.0
