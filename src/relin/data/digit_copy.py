"""A long number written out, then written again (task ``digit_copy``): a generation family whose answers are long
and whose every token is checkable, in a form a pretrained LM masters zero-shot, for OPAL's Table 3 (the setting
where a student's errors compound over its own generation) on a checkpoint teacher:

    Number: 4830291755...
    The same number again: 4830291755...

Every digit is its own token in the tokenizers this serves (Llama's, Qwen's, the project's digit-split BPE), so an
answer of ``digits`` digits is that many tokens after its leading space. Train and test numbers are drawn from
separate generators; only the answer and its eos are supervised, and it is scored on the answer alone
(:mod:`relin.eval.tasks.exact`): a checkpoint ends the line its own way.
"""
from __future__ import annotations

import numpy as np

from .rows import answer_row

TASK = "digit_copy"
PROMPT = "Number: {number}\nThe same number again:"


def generate_digit_copies(count: int, digits: int, tokenizer, encoder, rng: np.random.Generator) -> list[dict]:
    """``count`` rows of a ``digits``-digit number (leading zeros allowed) and its copy; ``length`` is the row's
    tokens (bos and eos included)."""
    rows = []
    for _ in range(count):
        number = "".join(map(str, rng.integers(0, 10, size=digits)))
        prompt = tokenizer(PROMPT.format(number=number), add_special_tokens=False)["input_ids"]
        answer = tokenizer(" " + number, add_special_tokens=False)["input_ids"]
        rows.append(answer_row(TASK, encoder.bos, encoder.eos, prompt, answer, answer=number, answers=[number],
                               length=len(prompt) + len(answer) + 2))
    return rows
