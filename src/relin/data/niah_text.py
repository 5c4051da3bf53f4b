"""Needle in a haystack in the real-text corpus's own form (task ``niah_text``): OPAL's NIAH as the paper ran it, on
a teacher whose retrieval has to come from its general training text, not from NIAH rows.

The haystack is a contiguous stretch of the held-out corpus files (never trained on); the needle is placed at the
boundary nearest ``depth`` × the haystack and the row ends by asking for it; the answer is the needle's value,
scored by RULER's :func:`relin.data.niah.string_match_all`. No train rows exist: every model, the teacher included,
is scored zero-shot. The needle, the question and where a needle may go are the corpus's idiom (:data:`IDIOMS`):

- ``assignment`` (Python source, the default corpus): one line ``magic_number_<key> = <value>`` at a line boundary,
  asked for by the assignment's left-hand side on a new line (``magic_number_<key> =``);
- ``passkey`` (prose): the passkey retrieval prompt (Mohtashami & Jaggi 2023; the form long-context evaluations of
  small LMs use): the instruction to find the hidden information first, the sentence pair ``The pass key is <value>.
  Remember it. <value> is the pass key.`` at a sentence boundary, then ``What is the pass key? The pass key is``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError
from .niah import NEEDLE_KEYS, distinct_values
from .rows import answer_row

TASK = "niah_text"


@dataclass(frozen=True)
class Idiom:
    """How a corpus hides and asks for a needle: ``needle`` and ``query`` are formats over ``key`` (the needle's
    name) whose value is spliced in as the answer's own ids (``value`` in ``needle`` splits it), ``intro`` opens the
    row, and a needle may go after a token whose text ``boundary`` accepts."""

    needle: str
    query: str
    boundary: Callable[[str], bool]
    intro: str = ""
    # what a needle placed at the haystack's end starts with when the cut there is no boundary ("": it goes to the
    # nearest boundary instead)
    lead: str = "\n"


IDIOMS = {
    "assignment": Idiom(needle="magic_number_{key} ={value}\n", query="\nmagic_number_{key} =",
                        boundary=lambda text: "\n" in text),
    "passkey": Idiom(needle=" The pass key is{value}. Remember it.{value} is the pass key.",
                     query="\n\nWhat is the pass key? The pass key is",
                     boundary=lambda text: text.rstrip(" ").endswith((".", "!", "?", "\n")),
                     intro="There is an important piece of information hidden inside a lot of irrelevant text. Find "
                           "it and memorize it. I will quiz you about the important information there.\n\n",
                     lead=""),
}
# kept for readers of the default idiom's rows
NAME = "magic_number_{key} ="
QUERY = IDIOMS["assignment"].query


def _ids(tokenizer, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def _stream(texts: list[str], tokenizer, idiom: Idiom) -> tuple[list[int], np.ndarray]:
    """The held-out files joined by newlines as one token stream, and the indices just after each token that ends
    a line or, for prose, a sentence (where a needle may go)."""
    ids: list[int] = []
    for text in texts:
        ids += _ids(tokenizer, text.rstrip("\n") + "\n")
    ending = {t for t in set(ids) if idiom.boundary(tokenizer.decode([t]))}
    ends = [i + 1 for i, t in enumerate(ids) if t in ending]
    return ids, np.asarray(ends, dtype=np.int64)


def _needle(tokenizer, idiom: Idiom, key: str, answer: list[int]) -> list[int]:
    pieces = idiom.needle.format(key=key, value="\0").split("\0")
    ids = _ids(tokenizer, pieces[0])
    for piece in pieces[1:]:
        ids += [*answer, *_ids(tokenizer, piece)]
    return ids


def generate_niah_text(texts: list[str], lengths: list[int], depths: list[float], per_depth: int, value_digits: int,
                       tokenizer, encoder, rng: np.random.Generator, idiom: str = "assignment") -> list[dict]:
    """``per_depth`` rows per (length, depth), each exactly ``length`` tokens (bos, intro, haystack with the needle,
    query, answer, eos). Shapes: token id lists; ``needle_distance`` counts the tokens from the needle's end to the
    answer, as for the synthetic families."""
    if not texts:
        raise ConfigError("data.niah.families: text needs the real-text corpus's held-out files (expected "
                          "real_text with test files, or the family removed)")
    form = IDIOMS[idiom]
    stream, boundaries = _stream(texts, tokenizer, form)
    lead, intro, ends = _ids(tokenizer, form.lead), _ids(tokenizer, form.intro), set(boundaries.tolist())
    rows = []
    for length in lengths:
        for depth in [d for d in depths for _ in range(per_depth)]:
            key = NEEDLE_KEYS[int(rng.integers(len(NEEDLE_KEYS)))]
            value = distinct_values(1, value_digits, rng)[0]
            # The needle's value tokens are the answer's own, so a model that copies them answers exactly.
            answer = _ids(tokenizer, " " + value)
            needle = _needle(tokenizer, form, key, answer)
            query = _ids(tokenizer, form.query.format(key=key))
            budget = length - 2 - len(intro) - len(needle) - len(query) - len(answer)
            if budget < 1 + len(lead) or budget > len(stream):
                raise ConfigError(f"data.niah.lengths: {length} tokens cannot hold a niah_text haystack of the "
                                  f"held-out files ({len(stream)} tokens) with its needle, query and answer")
            start = int(rng.integers(len(stream) - budget + 1))
            inside = boundaries[(boundaries > start) & (boundaries < start + budget)] - start
            # the haystack's end is a place for the needle when a lead makes it a boundary, or when it is one
            end = [budget] if form.lead or start + budget in ends else []
            candidates = np.concatenate([[0], inside, end])
            at = int(candidates[np.argmin(np.abs(candidates - depth * budget))])
            # At the haystack's end the needle starts its own line (the cut may fall mid-line); the haystack gives up
            # as many tokens at its start, so the row keeps its length.
            cut = lead if at == budget and start + budget not in ends else []
            haystack = stream[start + len(cut):start + budget]
            at -= len(cut)
            prompt = intro + haystack[:at] + cut + needle + haystack[at:] + query
            needle_end = len(intro) + at + len(cut) + len(needle)
            rows.append(answer_row(TASK, encoder.bos, encoder.eos, prompt, answer, answer=value, answers=[value],
                                   length=length, depth=depth, needle_distance=len(prompt) - needle_end))
    return rows
