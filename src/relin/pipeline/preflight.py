"""Rules across config sections that need the stages' own knowledge, checked before any job runs.

The typed configs check each section on its own (:mod:`relin.config`); what only the generators
know, such as how many tokens the longest gold answer takes, is checked here, so a bad combination
fails at ``relin check-config`` and at the start of ``snakemake``, not after the teachers trained.
:func:`check_writable` is the Snakefile's last check before the first job: that the jobs' outputs can be written.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from ..config.params import Params
from ..errors import ConfigError, InputError


def check(params: Params) -> None:
    """Raise :class:`ConfigError` (one line naming the key) on the first rule ``params`` breaks."""
    from ..data.synth_text import longest_answer_tokens

    for task, tokens in longest_answer_tokens(params.data).items():
        if params.eval.max_new_tokens < tokens:
            raise ConfigError(f"eval.max_new_tokens: {params.eval.max_new_tokens} cannot hold the longest "
                              f"{task} answer ({tokens} tokens); expected >= {tokens}")


def check_writable(paths: Iterable[str | Path]) -> None:
    """Raise :class:`InputError` (one line naming the directory) unless this process can create every path in
    ``paths`` (the outputs, logs and benchmarks of the jobs about to run): the nearest existing directory above
    each must be a directory it may write in. Run before the first job, so a read-only ``results/`` stops the run
    there, not at the first job Snakemake prepares (after the MLflow run began)."""
    checked: set[Path] = set()
    for path in map(Path, paths):
        directory = path.parent
        while not directory.exists() and directory != directory.parent:
            directory = directory.parent
        if directory in checked:
            continue
        if not directory.is_dir():
            raise InputError(f"{directory}: not a directory, but the DAG writes {path} under it (expected a "
                             f"directory, or nothing, at {directory})")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise InputError(f"{directory}/: not writable by this user, and the DAG writes {path} there (expected "
                             f"write permission, e.g. chmod u+w {directory}); nothing was run")
        checked.add(directory)
