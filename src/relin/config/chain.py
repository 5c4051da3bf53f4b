"""A paper's models as one table: per model the rule that builds it, what it starts from, the budget it borrows,
the config it reads (and the values its variant changes), and whether it is trained and evaluated.

The Snakemake rules derive every input, option and config of a model from its row (``workflow/rules/common.smk``:
``chain_inputs``, ``chain_options``, ``chain_config``), the report manifest lists the row's outputs
(:mod:`relin.manifest`), and the report's sections label it with the row's ``label``. Adding a model or a
variant to a paper is one row: a variant is a named config (``variant``), never a new flag.

Paths: a row ``name`` of paper ``p`` lives in ``results/<p>/<name><rep>/`` (``model/``, ``history.csv``,
``train_metrics.json``), where ``<rep>`` is ``""`` for the first training seed and ``-s<seed>`` for the others
(:func:`replicas`), and its evaluation is ``<p>-<name><rep>`` (:mod:`relin.names`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..names import replica_suffixes

TEACHER = "teacher"


@dataclass(frozen=True)
class Step:
    """One model of a paper's chain (a row of its table)."""

    rule: str
    """The Snakemake rule, one ``relin`` command, that builds the model."""
    label: str
    """Its line in the report's tables and figures."""
    start: str = ""
    """What it starts from: a row of the same table, :data:`TEACHER` (the paper's teacher), or ``""`` (nothing)."""
    budget: str = ""
    """The row whose ``train_metrics.json`` budget (steps, tokens) it matches, e.g. OPAL's Table 3 controls."""
    sections: tuple[str, ...] = ()
    """The config sections (dotted paths of ``params.yaml``) its command reads."""
    variant: Mapping[str, Any] = field(default_factory=dict)
    """Config values this row changes against those sections (dotted path -> value): a named config."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Options of its command that say which model of the rule it is (``{"phase": "short"}`` -> ``--phase short``)."""
    reads: Mapping[str, str] = field(default_factory=dict)
    """Other rows' outputs it reads, as command option -> ``<row>/<file>`` (``{"layers": "gdn/layers.json"}``)."""
    data: bool = True
    """It reads the paper's training data (``--data``)."""
    trained: bool = True
    """A training stage: history and train_metrics beside its model, one replica per training seed when listed in
    the paper's ``replicated``."""
    evaluated: bool = True
    """Scored by ``relin eval-lm`` and shown in the report's tables."""


Chain = Mapping[str, Step]


def check_chain(paper: str, chain: Chain) -> None:
    """Every ``start``, ``budget`` and ``reads`` names a row of the table, and no row depends on itself."""
    def refs(step: Step) -> list[str]:
        out = [step.budget, *(path.split("/", 1)[0] for path in step.reads.values())]
        return [ref for ref in out + [step.start if step.start != TEACHER else ""] if ref]

    for name, step in chain.items():
        if unknown := [ref for ref in refs(step) if ref not in chain]:
            raise ValueError(f"{paper} chain row {name!r}: {unknown[0]!r} is not a row of the table")
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in path:
            raise ValueError(f"{paper} chain: rows depend on themselves ({' -> '.join((*path, name))})")
        if name not in done:
            for ref in refs(chain[name]):
                visit(ref, (*path, name))
            done.add(name)

    for name in chain:
        visit(name, ())


def selected(chain: Chain, rows: list[str]) -> Chain:
    """The rows a config runs (``<paper>.rows``; empty: every row), in table order."""
    return {name: step for name, step in chain.items() if not rows or name in rows}


def check_rows(key: str, chain: Chain, rows: list[str]) -> None:
    """``rows`` names rows of the table, each with what it starts from, borrows a budget from and reads."""
    from .loader import ConfigError

    if unknown := [row for row in rows if row not in chain]:
        raise ConfigError(f"{key}: unknown row {unknown[0]!r} (expected rows of the table: {', '.join(chain)})")
    for name in rows:
        step = chain[name]
        needs = [step.budget, *(path.split("/", 1)[0] for path in step.reads.values())]
        needs += [step.start] if step.start not in ("", TEACHER) else []
        if missing := [need for need in needs if need and need not in rows]:
            raise ConfigError(f"{key}: row {name!r} needs row {missing[0]!r} (what it starts from, borrows a budget "
                              f"from or reads); expected it listed too")


def replicated(chain: Chain, listed: list[str], name: str) -> bool:
    """Whether a row has one replica per training seed: a trained row listed in ``replicated``, or an untrained
    row (a conversion) built from a replicated one."""
    step = chain[name]
    if step.trained:
        return name in listed
    return step.start in chain and replicated(chain, listed, step.start)


def replicas(chain: Chain, listed: list[str], seeds: list[int], name: str) -> list[str]:
    """The replica suffixes of a row: ``""`` (the first seed), then ``-s<seed>`` per further seed if replicated."""
    return replica_suffixes(seeds, replicated(chain, listed, name))


def parent_replica(chain: Chain, listed: list[str], parent: str, rep: str) -> str:
    """The replica of ``parent`` that replica ``rep`` of its child starts from: the same one when the parent is
    replicated too, else the parent as named (the child's seeds then branch from one parent)."""
    return rep if parent in chain and replicated(chain, listed, parent) else ""


def section_seeds(section: Mapping[str, Any], seeds: list[int]) -> list[int]:
    """The training seeds of a section's replicated models: its own ``seeds`` when it lists some, else ``seeds``."""
    return list(section.get("seeds") or seeds)


def with_variant(rendered: dict[str, Any], variant: Mapping[str, Any]) -> dict[str, Any]:
    """The sections JSON of a row (dotted section -> value) with the row's variant values set; a variant path is
    a section (``opal.layer_selection``) or a key inside one (``hedgemamba.match.loss``)."""
    out = json.loads(json.dumps(rendered))
    for path, value in variant.items():
        section = max((s for s in out if path == s or path.startswith(s + ".")), key=len, default=None)
        if section is None:
            raise ValueError(f"variant {path!r}: not inside any of the row's sections {sorted(out)}")
        if path == section:
            out[section] = value
            continue
        node = out[section]
        *parents, leaf = path[len(section) + 1:].split(".")
        for key in parents:
            node = node[key]
        node[leaf] = value
    return out


def with_seed(rendered: dict[str, Any], seed: int) -> dict[str, Any]:
    """Every training config in the sections (a ``*.train`` section or a section's ``train``) seeded ``seed``."""
    for path, value in rendered.items():
        if path.endswith(".train") and isinstance(value, dict):
            value["seed"] = seed
        elif isinstance(value, dict) and isinstance(value.get("train"), dict):
            value["train"]["seed"] = seed
    return rendered
