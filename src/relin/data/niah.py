"""Needle in a haystack, the three RULER families (``NVIDIA/RULER: scripts/data/synthetic/niah.py``).

- ``single``: one needle, queried;
- ``multikey``: ``num_keys`` needles with distinct keys, one queried (the rest are distractors);
- ``multiquery``: ``num_keys`` needles, all queried; the answer lists the values as ``"v1, v2, v3, v4"``.

The haystack is filler-language sentences sized so that the whole example (bos, haystack, needles,
question, answer prefix, answer, eos) is exactly ``length`` tokens; the last sentence is cut to fit.
The queried needle sits at the sentence boundary nearest to ``depth`` × haystack tokens; other
needles at random boundaries. Scoring is RULER's :func:`string_match_all`.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .filler import FillerLanguage
from .rows import answer_row

NEEDLE = "one of the special magic numbers for {key} is: {value}."
QUESTION_ONE = "what is the special magic number for {key}?"
ANSWER_PREFIX_ONE = "the special magic number for {key} is:"
QUESTION_ALL = "what are all the special magic numbers for {key}?"
ANSWER_PREFIX_ALL = "the special magic numbers for {key} are:"
NEEDLE_KEYS = (
    "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu", "nu",
    "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "mercury", "venus",
    "earth", "mars", "jupiter", "saturn", "uranus", "neptune")
FAMILIES = ("single", "multikey", "multiquery")


def niah_words() -> list[str]:
    """Every word the NIAH templates emit (for the tokenizer vocabulary)."""
    text = " ".join([NEEDLE, QUESTION_ONE, ANSWER_PREFIX_ONE, QUESTION_ALL, ANSWER_PREFIX_ALL, "and"])
    words = [w.strip(".,:?") for w in text.replace("{key}", "").replace("{value}", "").split()]
    return [w for w in dict.fromkeys(words) if w] + list(NEEDLE_KEYS)


def _enumerate(keys: list[str]) -> str:
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + " and " + keys[-1]


def generate_niah(family: str, length: int, depths: list[float | None], value_digits: int, num_keys: int,
                  filler: FillerLanguage, encoder, rng: np.random.Generator,
                  length_key: str = "data.niah.lengths") -> list[dict]:
    """One row per entry of ``depths`` (``None``: a uniform random depth, as for training).

    ``length_key`` names the config key of ``length`` in the error raised when it is too short.
    """
    rows = []
    for depth in depths:
        depth = float(rng.random()) if depth is None else depth
        num_needles = 1 if family == "single" else num_keys
        keys = [NEEDLE_KEYS[i] for i in rng.choice(len(NEEDLE_KEYS), size=num_needles, replace=False)]
        values = distinct_values(num_needles, value_digits, rng)
        queried = slice(None) if family == "multiquery" else slice(0, 1)
        needles = [encoder.ids(NEEDLE.format(key=k, value=v)) for k, v in zip(keys, values)]
        tail = encoder.ids(_question(keys[queried]))
        answer = ", ".join(values[queried])
        answer_ids = encoder.ids(answer)
        budget = length - 2 - sum(map(len, needles)) - len(tail) - len(answer_ids)
        if budget < 1:
            raise ConfigError(f"{length_key}: {length} tokens cannot hold the niah_{family} needles, "
                              f"question and answer with any haystack (expected >= {length - budget + 1})")
        sentences = _haystack(budget, filler, encoder, rng)
        starts = np.cumsum([0] + [len(s) for s in sentences])
        boundaries = [int(np.argmin(np.abs(starts - depth * budget)))]
        boundaries += rng.integers(len(sentences) + 1, size=num_needles - 1).tolist()
        prompt, ends = _insert(sentences, needles, boundaries)
        distance = min(len(prompt) - end for end in ends[queried]) + len(tail)
        rows.append(answer_row(f"niah_{family}", encoder.bos, encoder.eos, prompt + tail, answer_ids,
                               answer=answer, answers=values[queried], length=length, depth=depth,
                               needle_distance=distance))
    return rows


def _question(keys: list[str]) -> str:
    """The question and answer prefix: about one key, or about all of them (multi-query)."""
    asked = _enumerate(keys)
    if len(keys) == 1:
        return QUESTION_ONE.format(key=asked) + " " + ANSWER_PREFIX_ONE.format(key=asked)
    return QUESTION_ALL.format(key=asked) + " " + ANSWER_PREFIX_ALL.format(key=asked)


def _insert(sentences: list[list[int]], needles: list[list[int]], boundaries: list[int]
            ) -> tuple[list[int], list[int]]:
    """The haystack with ``needles[i]`` placed before sentence ``boundaries[i]`` (``len(sentences)``: at the end),
    and the index just past each needle in it."""
    prompt: list[int] = []
    ends = [0] * len(needles)
    for boundary in range(len(sentences) + 1):
        for i, (needle, at) in enumerate(zip(needles, boundaries)):
            if at == boundary:
                prompt += needle
                ends[i] = len(prompt)
        if boundary < len(sentences):
            prompt += sentences[boundary]
    return prompt, ends


def distinct_values(count: int, digits: int, rng: np.random.Generator) -> list[str]:
    """``count`` different ``digits``-digit needle values (as strings)."""
    low, high = 10 ** (digits - 1), 10 ** digits
    if high - low < count:
        raise ConfigError(f"data.niah.value_digits: {digits} digits give fewer than {count} distinct values")
    values: list[str] = []
    while len(values) < count:
        value = str(int(rng.integers(low, high)))
        if value not in values:
            values.append(value)
    return values


def _haystack(budget: int, filler: FillerLanguage, encoder, rng: np.random.Generator) -> list[list[int]]:
    """Filler sentences (token ids) totalling exactly ``budget`` tokens; the last one is cut to fit."""
    sentences, total = [], 0
    while total < budget:
        ids = encoder.ids(filler.sentence(rng))[: budget - total]
        sentences.append(ids)
        total += len(ids)
    return sentences


def string_match_all(preds: list[str], answers: list[list[str]]) -> float:
    """RULER's score: mean over samples of the fraction of gold values found in the prediction, × 100.

    Matching is case-insensitive substring search (``scripts/eval/synthetic/constants.py``).
    """
    if len(preds) != len(answers):
        raise ValueError(f"string_match_all: {len(preds)} predictions for {len(answers)} answer lists")
    if not preds:
        raise ValueError("string_match_all: no predictions to score")
    if any(not refs for refs in answers):
        raise ValueError("string_match_all: every sample needs at least one gold value")
    total = sum(sum(ref.lower() in pred.lower() for ref in refs) / len(refs) for pred, refs in zip(preds, answers))
    return 100.0 * total / len(preds)
