"""Saved datasets as every stage reads them: one line naming the file and what to do when a split
is missing, lacks a column, or is corrupt (a truncated Arrow file, an unreadable ``state.json``)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from ..errors import InputError

if TYPE_CHECKING:
    from datasets import Dataset

SYNTH_TEXT = "expected a synth_text DatasetDict saved with save_to_disk; regenerate it with relin synth-text"


def load_split(path: str | Path, split: str, columns: Sequence[str], expected: str = SYNTH_TEXT) -> "Dataset":
    """``split`` of the ``DatasetDict`` saved at ``path``, checked to hold ``columns``.

    Raises :class:`InputError` with one line naming the path (and the broken file, when one is)."""
    from datasets import DatasetDict, load_from_disk

    path = Path(path)
    if not path.is_dir():
        raise InputError(f"data {path}: no such directory ({expected})")
    try:
        data = load_from_disk(str(path))
    except FileNotFoundError as err:
        raise InputError(f"data {path}: not a saved dataset ({_first_line(err)}; {expected})") from None
    except Exception as err:  # noqa: BLE001 - pyarrow and json raise many types for damaged files
        raise InputError(f"data {path}: unreadable, a file is damaged ({_first_line(err)}); {expected}") from None
    if not isinstance(data, DatasetDict) or split not in data:
        found = ", ".join(data) if isinstance(data, DatasetDict) else "a single Dataset"
        raise InputError(f"data {path}: no {split!r} split (found {found}; {expected})")
    rows = data[split]
    missing = [c for c in columns if c not in rows.column_names]
    if missing:
        raise InputError(f"data {path}: {split} split lacks column(s) {', '.join(missing)} "
                         f"(expected {', '.join(columns)})")
    return rows


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__
