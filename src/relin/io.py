"""Atomic outputs, content digests and the producer records (manifests) beside outputs.

No partial artifact is ever visible under its final name: files and directories are written to a
hidden temporary sibling (``.NAME.tmp-PID``) and renamed into place. Temporaries left by a killed
writer are removed by the next write of the same output.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from .errors import InputError

MANIFEST_SUFFIX = ".relin-run.json"
# Written by Snakemake into directory outputs after a job ends: not part of the artifact's content.
NOT_CONTENT = frozenset({".snakemake_timestamp"})


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_temporaries(path: str | Path, kind: str) -> list[Path]:
    """The ``.NAME.<kind>-PID`` siblings of ``path`` whose writer is gone (``tmp``: partial writes, ``old``: outputs
    set aside by relin.pipeline.recovery)."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    return [stale for stale in path.parent.glob(f".{path.name}.{kind}-*")
            if (pid := stale.name.rpartition("-")[2]).isdigit() and int(pid) != os.getpid()
            and not _pid_alive(int(pid))]


def clear_stale_temporaries(path: str | Path) -> list[Path]:
    """Remove ``.NAME.tmp-PID`` / ``.NAME.old-PID`` siblings of ``path`` whose writer is gone."""
    removed = stale_temporaries(path, "tmp") + stale_temporaries(path, "old")
    for stale in removed:
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale, ignore_errors=True)
        else:
            stale.unlink(missing_ok=True)
    return removed


def _temporary(path: Path, kind: str) -> Path:
    return path.with_name(f".{path.name}.{kind}-{os.getpid()}")


@contextlib.contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """Yield a temporary sibling directory; on success it replaces ``path`` in one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clear_stale_temporaries(path)
    tmp = _temporary(path, "tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _default_modes(tmp)
    old = _temporary(path, "old")
    if path.exists():
        path.rename(old)
    tmp.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def _default_modes(root: Path) -> None:
    """Every file and folder under ``root`` with the modes the process's umask gives a new one (safetensors writes
    its file 0600, so a saved model would otherwise be the one output other users cannot read)."""
    mask = os.umask(0)
    os.umask(mask)
    for folder, dirs, files in os.walk(root):
        os.chmod(folder, 0o777 & ~mask)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o666 & ~mask)


def atomic_write_text(path: str | Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clear_stale_temporaries(path)
    tmp = _temporary(path, "tmp")
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
    """md5 of a file, or of a directory's files (relative names and contents, sorted).

    Producer (its manifest) and consumers (the inputs they record) call this one function, and
    Snakemake's timestamp marker is left out, so both see the same digest of the same content.
    """
    path = Path(path)
    h = hashlib.md5()
    for f in content_files(path):
        if path.is_dir():
            h.update(str(f.relative_to(path)).encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def content_files(path: str | Path) -> list[Path]:
    """The files that make up an output: the file itself, or a directory's files (sorted; Snakemake's timestamp
    marker left out)."""
    path = Path(path)
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and p.name not in NOT_CONTENT)


def file_stats(path: str | Path) -> dict[str, list[int]]:
    """Size and modification time (ns) of each file of an output, by its name relative to the output: a cheap
    fingerprint that any rewrite or truncation changes."""
    path = Path(path)
    return {(str(f.relative_to(path)) if path.is_dir() else f.name): [f.stat().st_size, f.stat().st_mtime_ns]
            for f in content_files(path)}


def manifest_path(path: str | Path) -> Path:
    """Where the producer's record of an output lives: beside it, never inside it, so a tracked
    output holds only its deterministic content."""
    path = Path(path)
    return path.with_name(path.name + MANIFEST_SUFFIX)


def producing_output(path: str | Path) -> Path:
    """The stage output that holds ``path``: ``path`` itself when a manifest describes it, else the nearest folder
    above it that has one (``results/data/bpe/tokenizer`` is part of what the BPE stage wrote); ``path`` when no
    stage wrote it."""
    path = Path(path)
    for candidate in (path, *path.parents):
        if candidate.name and manifest_path(candidate).is_file():
            return candidate
    return path


def read_manifest(path: str | Path) -> dict:
    """The producing stage's record (run id, stage, digest) of an output, if any."""
    candidate = manifest_path(path)
    if candidate.is_file():
        try:
            return json.loads(candidate.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
    return {}


def clear_orphan_manifest(path: str | Path) -> bool:
    """Remove the manifest of ``path`` when it no longer describes it (output gone or changed)."""
    record = manifest_path(path)
    if not record.is_file():
        return False
    path = Path(path)
    if path.exists() and read_manifest(path).get("digest") == digest(path):
        return False
    record.unlink(missing_ok=True)
    return True


def read_json(path: str | Path, what: str) -> dict[str, Any]:
    """A JSON object written by a stage (one line naming the path when missing or malformed)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file (expected {what})")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object ({what})")
    return data
