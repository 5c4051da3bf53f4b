"""Per-example scores and their aggregation per family, context length and needle depth.

An example contributes ``hits`` out of ``total``: MQAR its correct query positions out of all of
them (Zoology pools positions), NIAH its string-match fraction out of 1, arithmetic 0 or 1 out of 1.
A group's accuracy is ``sum(hits) / sum(total)``; ``n`` counts examples.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

NO_DEPTH = -1.0


@dataclass(frozen=True)
class ExampleScore:
    task: str
    length: int
    depth: float
    hits: float
    total: float
    needle_distance: int = -1


@dataclass(frozen=True)
class PassageScore:
    """One perplexity passage: its length and summed NLL (nats) over its ``tokens`` predicted tokens."""

    length: int
    nll: float
    tokens: int


@dataclass(frozen=True)
class GroupAccuracy:
    task: str
    length: int | None
    depth: float | None
    accuracy: float
    n: int


def _group(scores: Iterable[ExampleScore], key) -> list[GroupAccuracy]:
    sums: dict[tuple, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for s in scores:
        acc = sums[key(s)]
        acc[0] += s.hits
        acc[1] += s.total
        acc[2] += 1
    return [GroupAccuracy(task, length, depth, hits / total if total else float("nan"), int(n))
            for (task, length, depth), (hits, total, n) in sorted(sums.items())]


def by_task(scores: list[ExampleScore]) -> list[GroupAccuracy]:
    return _group(scores, lambda s: (s.task, None, None))


def by_task_length(scores: list[ExampleScore]) -> list[GroupAccuracy]:
    return _group(scores, lambda s: (s.task, s.length, None))


def by_task_length_depth(scores: list[ExampleScore]) -> list[GroupAccuracy]:
    return _group(scores, lambda s: (s.task, s.length, s.depth))
