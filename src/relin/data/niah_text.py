"""Needle in a haystack in the real-text corpus's own form (task ``niah_text``): OPAL's NIAH as the paper ran it, on
a teacher whose retrieval has to come from its general training text, not from NIAH rows.

The haystack is a contiguous stretch of the held-out corpus files (Python source, never trained on); the needle is one
assignment line ``magic_number_<key> = <value>`` placed at the line boundary nearest ``depth`` × the haystack; the
row ends by asking for it in the corpus's own idiom, the assignment's left-hand side on a new line
(``magic_number_<key> =``), and the answer is the value, scored by RULER's :func:`relin.data.niah.string_match_all`.
No train rows exist: every model, the teacher included, is scored zero-shot.
"""
from __future__ import annotations

import numpy as np

from ..errors import ConfigError
from .niah import NEEDLE_KEYS, distinct_values
from .rows import answer_row

TASK = "niah_text"
NAME = "magic_number_{key} ="
QUERY = "\n" + NAME


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _stream(texts: list[str], tokenizer) -> tuple[list[int], np.ndarray]:
    """The held-out files joined by newlines as one token stream, and the indices just after each token that ends
    a line (where a needle may go)."""
    ids: list[int] = []
    for text in texts:
        ids += _ids(tokenizer, text.rstrip("\n") + "\n")
    newline_tokens = {t for t in set(ids) if "\n" in tokenizer.decode([t])}
    ends_line = [i + 1 for i, t in enumerate(ids) if t in newline_tokens]
    return ids, np.asarray(ends_line, dtype=np.int64)


def generate_niah_text(texts: list[str], lengths: list[int], depths: list[float], per_depth: int, value_digits: int,
                       tokenizer, encoder, rng: np.random.Generator) -> list[dict]:
    """``per_depth`` rows per (length, depth), each exactly ``length`` tokens (bos, haystack with the needle,
    query, answer, eos). Shapes: token id lists; ``needle_distance`` counts the tokens from the needle's end to the
    answer, as for the synthetic families."""
    if not texts:
        raise ConfigError("data.niah.families: text needs the real-text corpus's held-out files (expected "
                          "real_text with test files, or the family removed)")
    stream, boundaries = _stream(texts, tokenizer)
    newline, ends_line = _ids(tokenizer, "\n"), set(boundaries.tolist())
    rows = []
    for length in lengths:
        for depth in [d for d in depths for _ in range(per_depth)]:
            key = NEEDLE_KEYS[int(rng.integers(len(NEEDLE_KEYS)))]
            value = distinct_values(1, value_digits, rng)[0]
            # The needle's value tokens are the answer's own, so a model that copies them answers exactly.
            answer = _ids(tokenizer, " " + value)
            needle = [*_ids(tokenizer, NAME.format(key=key)), *answer, *newline]
            query = _ids(tokenizer, QUERY.format(key=key))
            budget = length - 2 - len(needle) - len(query) - len(answer)
            if budget < 1 + len(newline) or budget > len(stream):
                raise ConfigError(f"data.niah.lengths: {length} tokens cannot hold a niah_text haystack of the "
                                  f"held-out files ({len(stream)} tokens) with its needle, query and answer")
            start = int(rng.integers(len(stream) - budget + 1))
            inside = boundaries[(boundaries > start) & (boundaries < start + budget)] - start
            candidates = np.concatenate([[0], inside, [budget]])
            at = int(candidates[np.argmin(np.abs(candidates - depth * budget))])
            # At the haystack's end the needle starts its own line (the cut may fall mid-line); the haystack gives up
            # as many tokens at its start, so the row keeps its length.
            lead = newline if at == budget and start + budget not in ends_line else []
            haystack = stream[start + len(lead):start + budget]
            at -= len(lead)
            prompt = haystack[:at] + lead + needle + haystack[at:] + query
            needle_end = at + len(lead) + len(needle)
            rows.append(answer_row(TASK, encoder.bos, encoder.eos, prompt, answer, answer=value, answers=[value],
                                   length=length, depth=depth, needle_distance=len(prompt) - needle_end))
    return rows
