"""The evaluation split of ``synth_text`` and its tokenizer, checked against the row contract."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from .tasks import KNOWN_TASKS

if TYPE_CHECKING:
    from datasets import Dataset

REQUIRED_COLUMNS = ("task", "input_ids", "labels", "prompt_len", "answer", "answers", "length", "depth")


def load_eval_split(path: str | Path, split: str = "test") -> "Dataset":
    """``split`` of the ``DatasetDict`` saved at ``path``; one-line :class:`InputError` otherwise."""
    from datasets import DatasetDict, load_from_disk

    path = Path(path)
    expected = "expected a synth_text DatasetDict saved with save_to_disk"
    if not path.is_dir():
        raise InputError(f"data {path}: no such directory ({expected})")
    try:
        data = load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as err:
        raise InputError(f"data {path}: could not load ({expected}; {str(err).splitlines()[0]})") from None
    if not isinstance(data, DatasetDict) or split not in data:
        found = ", ".join(data) if isinstance(data, DatasetDict) else "a single Dataset"
        raise InputError(f"data {path}: no {split!r} split (found {found}; {expected})")
    rows = data[split]
    missing = [c for c in REQUIRED_COLUMNS if c not in rows.column_names]
    if missing:
        raise InputError(f"data {path}: {split} split lacks column(s) {', '.join(missing)} "
                         f"(expected {', '.join(REQUIRED_COLUMNS)})")
    unknown = sorted(set(rows["task"]) - set(KNOWN_TASKS))
    if unknown:
        raise InputError(f"data {path}: unknown task(s) {', '.join(unknown)} "
                         f"(expected some of {', '.join(KNOWN_TASKS)})")
    return rows


def tokenizer_dir(data_path: str | Path) -> Path:
    """Where ``synth-text`` saves the tokenizer that produced the dataset's token ids."""
    return Path(data_path) / "tokenizer"
