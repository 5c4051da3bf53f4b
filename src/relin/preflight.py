"""Rules across config sections that need the stages' own knowledge, checked before any job runs.

The typed configs check each section on its own (:mod:`relin.config`); what only the generators
know, such as how many tokens the longest gold answer takes, is checked here, so a bad combination
fails at ``relin check-config`` and at the start of ``snakemake``, not after the teachers trained.
"""
from __future__ import annotations

from .config.params import Params
from .errors import ConfigError


def check(params: Params) -> None:
    """Raise :class:`ConfigError` (one line naming the key) on the first rule ``params`` breaks."""
    from .data.synth_text import longest_answer_tokens

    for task, tokens in longest_answer_tokens(params.data).items():
        if params.eval.max_new_tokens < tokens:
            raise ConfigError(f"eval.max_new_tokens: {params.eval.max_new_tokens} cannot hold the longest "
                              f"{task} answer ({tokens} tokens); expected >= {tokens}")
