"""The evaluation split of ``synth_text`` and its tokenizer, checked against the row contract."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..data.loaders import load_split
from ..errors import InputError
from .tasks import KNOWN_TASKS

if TYPE_CHECKING:
    from datasets import Dataset

REQUIRED_COLUMNS = ("task", "input_ids", "labels", "prompt_len", "answer", "answers", "length", "depth")


def load_eval_split(path: str | Path, split: str = "test") -> "Dataset":
    """``split`` of the ``DatasetDict`` saved at ``path``; one-line :class:`InputError` otherwise."""
    rows = load_split(path, split, REQUIRED_COLUMNS)
    unknown = sorted(set(rows["task"]) - set(KNOWN_TASKS))
    if unknown:
        raise InputError(f"data {path}: unknown task(s) {', '.join(unknown)} "
                         f"(expected some of {', '.join(KNOWN_TASKS)})")
    return rows


def tokenizer_dir(data_path: str | Path) -> Path:
    """Where ``synth-text`` saves the tokenizer that produced the dataset's token ids."""
    return Path(data_path) / "tokenizer"
