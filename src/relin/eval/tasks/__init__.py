"""How each ``synth_text`` task family is scored.

- ``labels``: teacher-forced argmax accuracy at the labelled positions (MQAR, as in Zoology);
- ``generate``: a greedy continuation of ``input_ids[:prompt_len]``, decoded to text and scored
  against the row's gold answer by the family's ``score(prediction, row) -> [0, 1]``;
- the filler family carries no accuracy: it is the perplexity corpus.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal

from . import arithmetic, niah

PERPLEXITY_TASK = "filler"


@dataclass(frozen=True)
class TaskScoring:
    """The scoring of one task family: its kind and, for generation, the answer scorer."""

    kind: Literal["labels", "generate"]
    score: Callable[[str, dict[str, Any]], float] | None = None


TASKS: dict[str, TaskScoring] = {
    "mqar": TaskScoring("labels"),
    "niah_single": TaskScoring("generate", niah.score),
    "niah_multikey": TaskScoring("generate", niah.score),
    "niah_multiquery": TaskScoring("generate", niah.score),
    "arithmetic": TaskScoring("generate", arithmetic.score),
}

KNOWN_TASKS = (*TASKS, PERPLEXITY_TASK)
