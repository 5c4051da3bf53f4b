"""The row schema shared by every task (see the synth-text contract) and the prompt + answer row builder.

Labels follow the Hugging Face causal-LM convention: ``labels[i]`` is the target at position ``i`` (the
model shifts internally), ``-100`` where nothing is supervised. ``prompt_len`` is the index of the first
supervised token: generation evaluation feeds ``input_ids[:prompt_len]``.
"""
from __future__ import annotations

from ..artifacts import IGNORE_INDEX

COLUMNS = ("task", "input_ids", "labels", "prompt_len", "answer", "answers", "length", "depth", "num_pairs",
           "needle_distance")


def row(task: str, input_ids: list[int], labels: list[int], *, answer: str = "", answers: list[str] = (),
        length: int, depth: float = -1.0, num_pairs: int = 0, needle_distance: int = -1) -> dict:
    """One dataset row; ``prompt_len`` is derived from the first supervised label. ``needle_distance``
    (NIAH): tokens between the end of the nearest queried needle and ``prompt_len``; -1 elsewhere."""
    prompt_len = next(i for i, label in enumerate(labels) if label != IGNORE_INDEX)
    return {"task": task, "input_ids": input_ids, "labels": labels, "prompt_len": prompt_len,
            "answer": answer, "answers": list(answers), "length": length, "depth": float(depth),
            "num_pairs": num_pairs, "needle_distance": needle_distance}


def answer_row(task: str, bos: int, eos: int, prompt: list[int], answer_ids: list[int], **fields) -> dict:
    """``bos prompt answer eos`` with only the answer tokens and eos supervised."""
    input_ids = [bos, *prompt, *answer_ids, eos]
    labels = [IGNORE_INDEX] * (1 + len(prompt)) + [*answer_ids, eos]
    return row(task, input_ids, labels, **fields)
