"""Lists written out, then copied or reversed: generation families whose answers are long and whose every token is
checkable, the setting where a student's errors compound over its own generation (OPAL's Table 3).

    list: xk xb xq ... xd copy: xk xb xq ... xd <eos>
    list: xk xb xq ... xd reverse: xd ... xq xb xk <eos>

Items are distinct words ``x<code>`` drawn without replacement from ``vocab_size`` of them, one token each in the
word tokenizer and in the BPE (every task word is added to it as one token), so an answer of ``n`` items is ``n``
tokens and eos. A copy is an induction (the token after the current one's earlier occurrence), a reversal the
opposite lookup (the token before it). Train lists hold ``min_items`` to ``items`` items; test lists exactly ``items``,
so every held-out answer is ``items`` tokens long. Only the answer and its eos are supervised.
"""
from __future__ import annotations

import numpy as np

from .mqar import _code
from .rows import answer_row

OPS = ("copy", "reverse")
HEAD = "list:"


def task_name(op: str) -> str:
    """The row task of an operation (``list_copy``, ``list_reverse``)."""
    return f"list_{op}"


def item_words(vocab_size: int) -> list[str]:
    """The item words ``xa, xb, ...`` (letters only: digits are split by the tokenizers)."""
    return [f"x{_code(i)}" for i in range(vocab_size)]


def list_words(vocab_size: int) -> list[str]:
    """Every word the family emits (for the tokenizer vocabulary)."""
    return ["list", *OPS, *item_words(vocab_size)]


def answer_items(op: str, items: list[str]) -> list[str]:
    """The gold answer of ``op`` on ``items``: the items as written (copy) or last first (reverse)."""
    if op not in OPS:
        raise ValueError(f"list operation {op!r}: expected one of {', '.join(OPS)}")
    return list(items) if op == "copy" else list(reversed(items))


def parse_list(text: str) -> tuple[str, list[str]]:
    """``(op, items)`` of a prompt's text ``list: w1 ... wn op:`` (an independent reading, for checks)."""
    head, _, rest = text.strip().partition(" ")
    if head != HEAD or not rest.endswith(":"):
        raise ValueError(f"not a list prompt: {text[:60]!r}")
    *items, op = rest[:-1].split()
    return op, items


def generate_lists(op: str, count: int, min_items: int, max_items: int, vocabulary: list[str], encoder,
                   rng: np.random.Generator) -> list[dict]:
    """``count`` rows of ``op`` on ``min_items``..``max_items`` distinct items from ``vocabulary``; ``length`` is the
    row's tokens (bos and eos included)."""
    rows = []
    for _ in range(count):
        n = int(rng.integers(min_items, max_items + 1))
        items = [vocabulary[i] for i in rng.choice(len(vocabulary), size=n, replace=False)]
        answer = answer_items(op, items)
        text = " ".join(answer)
        prompt, answer_ids = encoder.ids(" ".join([HEAD, *items, f"{op}:"])), encoder.ids(text)
        rows.append(answer_row(task_name(op), encoder.bos, encoder.eos, prompt, answer_ids, answer=text,
                               answers=[text], length=len(prompt) + len(answer_ids) + 2))
    return rows
