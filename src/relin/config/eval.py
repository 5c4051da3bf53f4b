"""The ``eval`` section: language-model evaluation."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .loader import option


@dataclass(kw_only=True)
class EvalConfig:
    """Evaluation of language models: perplexity and accuracy per task family and context length."""

    batch_size: int = option(32, "sequences per evaluation batch", minimum=1)
    max_new_tokens: int = option(32, "greedy tokens generated for NIAH and arithmetic answers "
                                     "(at least the longest gold answer)", minimum=1)
    precision: Literal["fp32", "bf16"] = option("fp32", "the models' arithmetic: fp32, or bf16 autocast over fp32 "
                                                        "weights (the pretrained overlay's: twice the speed on a "
                                                        "CPU with bf16 units, every model scored alike)")
