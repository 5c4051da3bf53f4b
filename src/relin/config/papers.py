"""The papers relin reproduces and the models of each: the chain papers' tables (:mod:`.chain`) as a config runs
them, with every model's replicas and evaluation names. The rules, the report manifest and the report read these
lists; none of them learns what exists from another."""
from __future__ import annotations

from typing import Any, Callable

from ..names import chain_dir, chain_eval
from .chain import Chain, replicas, selected

PAPERS = ("opal", "hedgemamba", "lia_mtr")

Get = Callable[[str], Any]
"""The value of a dotted params path (``get("opal.teacher")``)."""


def chains(get: Get | None = None) -> dict[str, Chain]:
    """Each chain paper's table; with ``get``, the rows its config runs (``<paper>.rows``)."""
    from .hedgemamba import CHAIN as HEDGEMAMBA
    from .opal import CHAIN as OPAL

    tables = {"opal": OPAL, "hedgemamba": HEDGEMAMBA}
    return {paper: paper_chain(paper, get) if get else chain for paper, chain in tables.items()}


def paper_chain(paper: str, get: Get) -> Chain:
    """One chain paper's table, the rows its config runs: reads ``<paper>.rows`` alone (a stage declares only its
    own paper's sections)."""
    return selected(chains()[paper], get(f"{paper}.rows"))


def chain_models(paper: str, get: Get) -> list[tuple[str, str]]:
    """``(row, replica)`` of every model of a paper's chain, in table order, each replica after the first."""
    chain = paper_chain(paper, get)
    listed, seeds = get(f"{paper}.replicated"), get(f"{paper}.seeds") or get("seeds")
    return [(name, rep) for name in chain for rep in replicas(chain, listed, seeds, name)]


def evaluated_models(paper: str, get: Get) -> dict[str, str]:
    """The evaluation name (``<paper>-<row><rep>``) -> model directory of each evaluated model of a chain."""
    chain = paper_chain(paper, get)
    return {chain_eval(paper, name, rep): f"{chain_dir(paper, name, rep)}/model"
            for name, rep in chain_models(paper, get) if chain[name].evaluated}
