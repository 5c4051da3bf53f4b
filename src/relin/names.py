"""The names and paths the rules, the stages and the report agree on, in one place.

An evaluation is named ``teacher-<arch>`` for a teacher and ``<paper>-<row><rep>`` for a model of a paper's chain
(:mod:`relin.config.chain`), where ``<rep>`` is ``""`` for the first training seed and ``-s<seed>`` for another
(a replica). A chain model lives in ``results/<paper>/<row><rep>/``, a teacher in ``results/teacher/<arch>/``, an
evaluation's outputs in ``results/eval/<name>/``, a paper's report manifest in ``results/report-inputs/<paper>.json``,
a LIA-MTR bridge's MME answers in ``results/lia_mtr/mme/<bridge><rep>/``.
"""
from __future__ import annotations

import re
from typing import Sequence

# The replica suffix as a Snakemake wildcard's constraint ("" or "-s<seed>"), and as a pattern over eval names.
REPLICA_WILDCARD = "(-s[0-9]+)?"
REPLICA_NAME = re.compile(r"^(?P<base>.+)-s(?P<seed>[0-9]+)$")
# A scored language model's three outputs (relin eval-lm), by the report's input kind.
EVAL_FILES = {"eval": "metrics.json", "items": "items.csv", "by_length": "accuracy_by_length.csv"}
# A LIA-MTR bridge's (or the text-only reference's) MME outputs (relin lia-mtr-eval-mme, relin lia-mtr-mme-text):
# the official layout's answers, the scores, each question as scored, the figure.
MME_FILES = {"answers": "answers", "metrics": "metrics.json", "items": "items.csv", "figure": "mme.png"}


def replica(seed: int) -> str:
    """The suffix of the replica trained with ``seed`` (not the first seed's, which has none)."""
    return f"-s{seed}"


def replica_suffixes(seeds: Sequence[int], replicated: bool) -> list[str]:
    """``""`` (the first seed), then one suffix per further seed when the model is replicated."""
    return ["", *(replica(s) for s in seeds[1:])] if replicated else [""]


def replica_seed(rep: str, seeds: Sequence[int]) -> int:
    """The training seed of replica ``rep`` (the first seed for ``""``)."""
    return int(rep[2:]) if rep else seeds[0]


def teacher_eval(arch: str) -> str:
    return f"teacher-{arch}"


def chain_eval(paper: str, row: str, rep: str = "") -> str:
    """The evaluation name of a chain model: ``<paper>-<row><rep>``."""
    return f"{paper}-{row}{rep}"


def teacher_dir(arch: str) -> str:
    return f"results/teacher/{arch}"


def chain_dir(paper: str, row: str, rep: str = "") -> str:
    return f"results/{paper}/{row}{rep}"


def eval_file(name: str, kind: str) -> str:
    """``results/eval/<name>/<file>`` of an evaluation, ``kind`` a key of :data:`EVAL_FILES`."""
    return f"results/eval/{name}/{EVAL_FILES[kind]}"


def mme_file(name: str, kind: str) -> str:
    """``results/lia_mtr/mme/<name>/<file>`` of a bridge's MME answers (``name``: ``<bridge><rep>`` or
    ``text_reference``), ``kind`` a key of :data:`MME_FILES`."""
    return f"results/lia_mtr/mme/{name}/{MME_FILES[kind]}"


def manifest_file(paper: str) -> str:
    return f"results/report-inputs/{paper}.json"


def eval_owner(name: str) -> tuple[str, str]:
    """``("teacher", <arch>)`` for a teacher's evaluation, ``(<paper>, <row><rep>)`` for a chain model's."""
    owner, rest = name.split("-", 1)
    return owner, rest
