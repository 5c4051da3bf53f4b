"""Stage outputs the report reads, each checked on load (one-line :class:`InputError` naming the path).

A file given as ``NAME=PATH`` is labelled ``NAME``; otherwise the label follows the artifact layout:
an evaluation carries its own name (``metrics.json`` ``name``), a training history is named after
``results/<role>/<arch>/history.csv`` as ``<role>-<arch>`` (the eval-lm naming, e.g. ``teacher-qwen3``),
and an ``accuracy_by_length.csv`` after its directory (``results/eval/<name>/``).
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts import BY_LENGTH_COLUMNS, EVAL_KEYS, HISTORY_COLUMNS, SPEED_COLUMNS
from ..errors import InputError
from ..io import read_json  # noqa: F401 - the report's readers are all importable from here


@dataclass(frozen=True)
class EvalResult:
    """One ``metrics.json`` of ``relin eval-lm``."""

    name: str
    metrics: dict[str, Any]
    path: Path


@dataclass(frozen=True)
class NamedRows:
    """The rows of one CSV output (numbers parsed) and the model it belongs to."""

    name: str
    rows: list[dict[str, Any]]
    path: Path


def split_name(spec: str) -> tuple[str | None, Path]:
    """``"NAME=PATH"`` -> ``(NAME, PATH)``; a plain path -> ``(None, PATH)``."""
    name, sep, path = spec.partition("=")
    return (name, Path(path)) if sep and name and "/" not in name else (None, Path(spec))


def _existing(path: Path, what: str) -> Path:
    if not path.is_file():
        raise InputError(f"{path}: no such file (expected {what})")
    return path


def read_eval(spec: str) -> EvalResult:
    name, path = split_name(spec)
    _existing(path, "a metrics.json written by relin eval-lm")
    try:
        metrics = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    missing = [k for k in EVAL_KEYS if not isinstance(metrics, dict) or k not in metrics]
    if missing:
        raise InputError(f"{path}: lacks {', '.join(missing)} (expected a metrics.json written by relin eval-lm)")
    return EvalResult(name=name or str(metrics["name"]), metrics=metrics, path=path)


def _number(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text if text else math.nan


def read_csv_rows(path: Path, columns: tuple[str, ...], what: str) -> list[dict[str, Any]]:
    _existing(path, what)
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: lacks column(s) {', '.join(missing)} (expected {what})")
        return [{k: _number(v) if k != "task" else v for k, v in row.items()} for row in reader]


def read_history(spec: str) -> NamedRows:
    name, path = split_name(spec)
    rows = read_csv_rows(path, HISTORY_COLUMNS, "a history.csv with columns step,loss,...")
    role_arch = [p.name for p in (path.parent.parent, path.parent) if p.name]
    return NamedRows(name=name or "-".join(role_arch) or path.stem, rows=rows, path=path)


@dataclass(frozen=True)
class NamedJson:
    """One JSON output of a stage (e.g. ``train_metrics.json``) and the model it belongs to."""

    name: str
    data: dict[str, Any]
    path: Path


def read_train_metrics(spec: str, what: str = "a train_metrics.json of a training stage") -> NamedJson:
    """``[NAME=]<file>.json`` of a training stage (its ``train_metrics.json``, HedgeMamba's ``decays.json``),
    named ``<role>-<stage>`` after its directory as a history is (``results/opal/onpolicy/train_metrics.json``
    -> ``opal-onpolicy``)."""
    name, path = split_name(spec)
    data = read_json(path, what)
    role_stage = [p.name for p in (path.parent.parent, path.parent) if p.name]
    return NamedJson(name=name or "-".join(role_stage), data=data, path=path)


def read_by_length(spec: str) -> NamedRows:
    name, path = split_name(spec)
    rows = read_csv_rows(path, BY_LENGTH_COLUMNS,
                         "an accuracy_by_length.csv with columns " + ",".join(BY_LENGTH_COLUMNS))
    return NamedRows(name=name or path.parent.name or path.stem, rows=rows, path=path)


def read_speed(spec: str) -> NamedRows:
    name, path = split_name(spec)
    rows = read_csv_rows(path, SPEED_COLUMNS,
                         "a speed.csv of relin opal-hybrid-speed with columns " + ",".join(SPEED_COLUMNS))
    return NamedRows(name=name or path.parent.name, rows=rows, path=path)


def unique_names(items: list, what: str) -> None:
    """Models are grouped by name: two inputs of one kind under the same name are an error."""
    seen: dict[str, Path] = {}
    for item in items:
        if item.name in seen:
            raise InputError(f"{item.path}: {what} name {item.name!r} already used by {seen[item.name]} "
                             f"(expected one per model; label it NAME=PATH)")
        seen[item.name] = item.path
