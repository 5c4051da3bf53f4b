"""The ``eval`` section: language-model evaluation."""
from __future__ import annotations

from dataclasses import dataclass

from .loader import option


@dataclass(kw_only=True)
class EvalConfig:
    """Evaluation of language models: perplexity and accuracy per task family and context length."""

    batch_size: int = option(32, "sequences per evaluation batch", minimum=1)
    max_new_tokens: int = option(32, "greedy tokens generated for NIAH and arithmetic answers "
                                     "(at least the longest gold answer)", minimum=1)
