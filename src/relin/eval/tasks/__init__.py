"""How each ``synth_text`` task family is scored.

- ``labels``: teacher-forced argmax accuracy at the labelled positions (MQAR, as in Zoology);
- ``generate``: a greedy continuation of ``input_ids[:prompt_len]``, decoded to text and scored
  against the row's gold answer by the family's ``score(prediction, row) -> [0, 1]``;
- ``exact``: the greedy continuation as long as the row's own answer and eos (``budget(row)``), scored in token ids
  by ``score_tokens(generated, row) -> {0, 1}``: one wrong token and the answer scores 0 (the walks and lists; the
  walks and digit copies on their answer alone, ``stops=False``, the lists with their eos).
  Greedy decoding writes the gold answer exactly when every gold token is the argmax given the gold before it, so
  :func:`relin.eval.lm.evaluate_lm` reads it in one teacher-forced pass (a test checks it against generation);
- the perplexity corpus carries no accuracy: the held-out real-text files (``text``) where the data has them, else
  the filler passages.

Each family declares its chance level: the accuracy of a model that knows the answer format but reads
nothing of the context (MQAR: one of the values the labels hold; a 4-digit needle value or an arithmetic
result: ~0). Verdicts treat a model whose interval reaches it as at chance.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Sequence

from . import arithmetic, exact, niah

# The perplexity corpus: the first of these the test split holds.
PERPLEXITY_TASKS = ("text", "filler")


@dataclass(frozen=True)
class TaskScoring:
    """The scoring of one task family: its kind and, for generation, the answer scorer."""

    kind: Literal["labels", "generate", "exact"]
    score: Callable[[str, dict[str, Any]], float] | None = None
    chance: Callable[[Sequence[dict[str, Any]]], float] = lambda rows: 0.0
    score_tokens: Callable[[Sequence[int], dict[str, Any]], float] | None = None
    budget: Callable[[dict[str, Any]], int] | None = None
    stops: bool = True
    """An ``exact`` answer scores only when eos follows it (``False``: the answer's tokens alone are scored)."""


def _one_of_the_labelled_values(rows: Sequence[dict[str, Any]]) -> float:
    """Chance of a teacher-forced family: 1 / the number of distinct tokens its labels ask for."""
    values = {t for r in rows for t in r["labels"][r["prompt_len"]:] if t >= 0}
    return 1.0 / len(values) if values else 0.0


TASKS: dict[str, TaskScoring] = {
    "mqar": TaskScoring("labels", chance=_one_of_the_labelled_values),
    "niah_single": TaskScoring("generate", niah.score),
    "niah_multikey": TaskScoring("generate", niah.score),
    "niah_multiquery": TaskScoring("generate", niah.score),
    "niah_text": TaskScoring("generate", niah.score),
    "arithmetic": TaskScoring("generate", arithmetic.score),
    **{task: TaskScoring("exact", score_tokens=exact.score_tokens, budget=exact.budget)
       for task in ("list_copy", "list_reverse")},
    # A walk is scored on its items: stopping after exactly ``items`` of them is counting, which no Table 3 claim is
    # about and which the distilled hybrids here never learn (they write every item right and go on).
    "walk": TaskScoring("exact", score_tokens=exact.score_answer, budget=exact.budget, stops=False),
    "digit_copy": TaskScoring("exact", score_tokens=exact.score_answer, budget=exact.answer_budget, stops=False),
}

KNOWN_TASKS = (*TASKS, *PERPLEXITY_TASKS)
