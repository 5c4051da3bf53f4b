"""Token-weighted perplexity: ``exp(sum of NLL / number of predicted tokens)`` over a corpus."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .teacher_forced import LabelScore


@dataclass(frozen=True)
class Perplexity:
    """Perplexity of a corpus and the number of tokens it was measured on."""

    value: float
    tokens: int


def perplexity(scores: list[LabelScore]) -> Perplexity:
    """Pool the per-example NLL of :func:`~relin.eval.teacher_forced.score_labels` over all tokens.

    Long examples weigh more than short ones (each token counts once), as in a language-model
    validation loss; a corpus without labelled tokens has no perplexity (``nan``).
    """
    tokens = sum(s.count for s in scores)
    if tokens == 0:
        return Perplexity(value=math.nan, tokens=0)
    return Perplexity(value=math.exp(sum(s.nll for s in scores) / tokens), tokens=tokens)
