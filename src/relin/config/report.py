"""The ``report`` section."""
from __future__ import annotations

from dataclasses import dataclass

from .loader import option


@dataclass(kw_only=True)
class ReportConfig:
    """The HTML/Markdown report built from stage outputs."""

    title: str = option("relin report", "report title")
