"""Atomic outputs and content digests: no partial artifact is ever visible under its final name."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

MANIFEST = "relin-run.json"


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``path`` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = path.with_name(f".{path.name}.old-{os.getpid()}")
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def atomic_write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)
    return path


def atomic_write_csv(path: str | Path, rows: list[dict], columns: list[str]) -> Path:
    """Rows as CSV with ``columns`` as the header (the header alone when there are no rows)."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return atomic_write_text(path, buffer.getvalue())


def atomic_write_json(path: str | Path, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def digest(path: str | Path) -> str:
    """md5 of a file, or of a directory's files (relative names and contents, sorted), like DVC."""
    path = Path(path)
    h = hashlib.md5()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.name != MANIFEST)
    for f in files:
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def read_manifest(path: str | Path) -> dict:
    """The producing stage's record (run id, stage) for an artifact directory or file, if any."""
    path = Path(path)
    candidate = path / MANIFEST if path.is_dir() else path.with_name(path.name + "." + MANIFEST)
    if candidate.is_file():
        return json.loads(candidate.read_text())
    return {}


def manifest_path(path: str | Path) -> Path:
    path = Path(path)
    return path / MANIFEST if path.is_dir() else path.with_name(path.name + "." + MANIFEST)
