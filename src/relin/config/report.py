"""The ``report`` section."""
from __future__ import annotations

from dataclasses import dataclass

from .loader import option


@dataclass(kw_only=True)
class ReportConfig:
    """The HTML/Markdown report built from stage outputs, and how its verdicts are drawn."""

    title: str = option("relin report", "report title")
    mastery: float = option(0.8, "a reference (teacher, text-only LLM, bridge-NIAH MHA) counts as competent on a task "
                                 "family at this accuracy; recovery is taken over the families the teacher masters",
                            minimum=0, maximum=1)
    resamples: int = option(2000, "bootstrap replicates behind every 95% interval", minimum=100)
    min_steps: int = option(50, "a run whose training stages took fewer optimizer steps is a plumbing run: the report "
                                "says at its head that its verdicts are not evidence", minimum=1)
