"""The evaluation of one causal LM on the ``synth_text`` test split.

Perplexity of the held-out real-text files (token-weighted, overall and by position in the file; the filler
passages where the data has no text rows), MQAR accuracy at the labelled positions (teacher-forced), NIAH
string-match and arithmetic exact match of greedy continuations, the walks' and lists' greedy exact match token by
token (read in one teacher-forced pass, which decides it exactly);
every score grouped per task family, context length and needle depth.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..artifacts import IGNORE_INDEX
from ..data.text_rows import POSITION_BINS, bin_name
from ..errors import ConfigError
from .generation import Generator, continuations, greedy_generator
from .perplexity import Perplexity, perplexity
from .results import ExampleScore, PassageScore, by_task, by_task_length, by_task_length_depth
from .tasks import PERPLEXITY_TASKS, TASKS
from .teacher_forced import LabelScore, score_labels

if TYPE_CHECKING:
    from datasets import Dataset

    from ..config.eval import EvalConfig


@dataclass
class LMEvaluation:
    """Scores of one model: perplexity (and its per-passage scores), per-example task scores, each family's
    chance level and seconds spent per family."""

    name: str
    perplexity: Perplexity
    scores: list[ExampleScore]
    passages: list[PassageScore] = field(default_factory=list)
    chance: dict[str, float] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    corpus: str = PERPLEXITY_TASKS[0]
    by_position: dict[str, Perplexity] = field(default_factory=dict)

    def metrics(self) -> dict[str, Any]:
        """``metrics.json``: perplexity, accuracy per family, their mean (``overall``), by length.

        Timings stay out (they go to MLflow), so the same model and data give the same file."""
        accuracy = {g.task: g.accuracy for g in by_task(self.scores)}
        by_length: dict[str, dict[str, float]] = {}
        for g in by_task_length(self.scores):
            by_length.setdefault(g.task, {})[str(g.length)] = g.accuracy
        ppl = self.perplexity.value
        return {
            "name": self.name,
            "perplexity": None if math.isnan(ppl) else ppl,
            "perplexity_tokens": self.perplexity.tokens,
            "perplexity_corpus": self.corpus,
            "perplexity_by_position": {name: None if math.isnan(p.value) else p.value
                                       for name, p in self.by_position.items()},
            "accuracy": accuracy,
            "overall": sum(accuracy.values()) / len(accuracy) if accuracy else None,
            "accuracy_by_length": by_length,
            "n": {g.task: g.n for g in by_task(self.scores)},
            "chance": self.chance,
        }

    def item_rows(self) -> list[dict[str, Any]]:
        """Rows of ``items.csv``, one per test example: the task families in :data:`TASKS` order (each in split
        order), then the perplexity passages; the evaluated items a report resamples for its intervals."""
        rows = [{"task": s.task, "length": s.length, "depth": s.depth, "needle_distance": s.needle_distance,
                 "hits": s.hits, "total": s.total, "nll": 0.0, "tokens": 0} for s in self.scores]
        rows += [{"task": self.corpus, "length": p.length, "depth": -1.0, "needle_distance": -1, "hits": 0.0,
                  "total": 0.0, "nll": p.nll, "tokens": p.tokens} for p in self.passages]
        return rows

    def by_length_rows(self) -> list[dict[str, Any]]:
        """Rows of ``accuracy_by_length.csv``: task, length, depth, accuracy, n."""
        return [{"task": g.task, "length": g.length, "depth": g.depth, "accuracy": g.accuracy, "n": g.n}
                for g in by_task_length_depth(self.scores)]


def _answer_tokens(labels: list[int], prompt_len: int, eos_token_id: int | None) -> int:
    return sum(1 for t in labels[prompt_len:] if t != IGNORE_INDEX and t != eos_token_id)


def _check_generation_budget(examples: list[dict], max_new_tokens: int, eos_token_id: int | None) -> None:
    """A budget shorter than a gold answer would score truncation, not recall: refuse it up front."""
    for task, scoring in TASKS.items():
        answers = [_answer_tokens(r["labels"], r["prompt_len"], eos_token_id) for r in examples if r["task"] == task]
        if scoring.kind == "generate" and answers and max(answers) > max_new_tokens:
            raise ConfigError(f"eval.max_new_tokens: {max_new_tokens} cannot hold the longest {task} answer "
                              f"({max(answers)} tokens); expected >= {max(answers)}")


def without_eos(labels: list[int]) -> list[int]:
    """``labels`` with their last supervised token (the answer's eos) unsupervised."""
    last = max(i for i, t in enumerate(labels) if t != IGNORE_INDEX)
    return [*labels[:last], IGNORE_INDEX, *labels[last + 1:]]


def _task_results(model, generator: Generator, tokenizer, task: str, chosen: list[dict],
                  cfg: "EvalConfig") -> list[tuple[float, float]]:
    """``(hits, total)`` per example of one task family."""
    scoring = TASKS[task]
    if scoring.kind == "labels":
        label_scores = score_labels(model, [r["input_ids"] for r in chosen], [r["labels"] for r in chosen],
                                    cfg.batch_size)
        return [(s.correct, s.count) for s in label_scores]
    if scoring.kind == "exact":
        # Greedy decoding writes the gold answer and its eos exactly when, and only when, each gold token is the
        # argmax given the gold tokens before it (by induction over the answer): one teacher-forced pass scores
        # what generating the answer token by token would, at the cost of one forward.
        labels = [r["labels"] if scoring.stops else without_eos(r["labels"]) for r in chosen]
        label_scores = score_labels(model, [r["input_ids"] for r in chosen], labels, cfg.batch_size)
        return [(float(s.correct == s.count), 1.0) for s in label_scores]
    prompts = [r["input_ids"][:r["prompt_len"]] for r in chosen]
    generated = continuations(generator, prompts, cfg.max_new_tokens, cfg.batch_size, tokenizer.eos_token_id)
    texts = tokenizer.batch_decode(generated, skip_special_tokens=True)
    return [(scoring.score(text, r), 1.0) for text, r in zip(texts, chosen)]


def evaluate_lm(model, rows: "Dataset", tokenizer, cfg: "EvalConfig", *, name: str,
                generator: Generator | None = None) -> LMEvaluation:
    """Evaluate ``model`` on ``rows`` (the test split); ``generator`` defaults to greedy decoding.

    Raises :class:`ConfigError`, before any work, when ``cfg.max_new_tokens`` cannot hold the
    longest gold answer of a generation task.
    """
    names = ("task", "input_ids", "labels", "prompt_len", "answer", "answers", "length", "depth", "needle_distance")
    columns = {c: rows[c] if c in rows.column_names else [-1] * len(rows) for c in names}
    examples = [dict(zip(columns, values)) for values in zip(*columns.values())]
    _check_generation_budget(examples, cfg.max_new_tokens, tokenizer.eos_token_id)
    if generator is None:
        generator = greedy_generator(model, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    seconds: dict[str, float] = {}

    start = time.perf_counter()
    corpus = next((t for t in PERPLEXITY_TASKS if any(r["task"] == t for r in examples)), PERPLEXITY_TASKS[0])
    passages_rows = [r for r in examples if r["task"] == corpus]
    scored = score_labels(model, [r["input_ids"] for r in passages_rows], [r["labels"] for r in passages_rows],
                          cfg.batch_size, POSITION_BINS)
    passages = [PassageScore(r["length"], s.nll, s.count) for r, s in zip(passages_rows, scored)]
    by_position = {bin_name(*b): perplexity([LabelScore(s.by_position[i][0], 0, s.by_position[i][1]) for s in scored])
                   for i, b in enumerate(POSITION_BINS)}
    seconds[corpus] = time.perf_counter() - start

    scores: list[ExampleScore] = []
    chance: dict[str, float] = {}
    for task in TASKS:
        chosen = [r for r in examples if r["task"] == task]
        if not chosen:
            continue
        start = time.perf_counter()
        results = _task_results(model, generator, tokenizer, task, chosen, cfg)
        scores += [ExampleScore(task=task, length=r["length"], depth=round(float(r["depth"]), 6), hits=hits,
                                total=total, needle_distance=int(r["needle_distance"]))
                   for r, (hits, total) in zip(chosen, results)]
        chance[task] = TASKS[task].chance(chosen)
        seconds[task] = time.perf_counter() - start
    return LMEvaluation(name=name, perplexity=perplexity(scored), scores=scores, passages=passages, chance=chance,
                        seconds=seconds, corpus=corpus, by_position=by_position)
