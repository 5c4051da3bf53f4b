"""The comparative claims' margins as the verdicts read them, from the ``report.margins`` config."""
from __future__ import annotations

from ..config.report import MARGINS, MarginConfig
from .verdicts import Margin


def margins_from(config: dict[str, MarginConfig]) -> dict[str, Margin]:
    """``{claim id: Margin}``; a margin in questions keeps its count (the section converts it to points of the
    category it compares)."""
    return {key: Margin(m.value, m.reason if m.unit == "points" else f"{m.reason}; {m.value:g} question(s)")
            for key, m in {**MARGINS, **config}.items()}


def default_margins() -> dict[str, Margin]:
    return margins_from(MARGINS)
