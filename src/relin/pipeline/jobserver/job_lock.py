"""One writer per job: a stage holds a lock on what it writes for as long as it runs.

Snakemake's own locks and relin's pipeline lock are the pipeline's: they end with the ``snakemake`` that took them,
and a job that outlived it (or a stage started by hand beside a run) would meet a second writer of the same output
and checkpoint folder. :func:`job_lock` is taken by the stage itself (:func:`relin.tracking.stage_run` for its first
output, :func:`relin.stages._training.run_training` for its checkpoint folder): an ``flock`` on a hidden sibling,
``.NAME.relin-lock``, which records the holder and is removed when the holder releases it (the kernel frees the lock
of a holder that dies). A second writer is refused in one line naming the holder, except that it waits up to
:data:`WAIT_S` for a holder whose pipeline is gone: that job is stopping (:mod:`.lifetime`), and the run after a
killed one starts at once.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import IO, Iterator

from ...errors import UserError
from . import lifetime

SUFFIX = ".relin-lock"
# A holder whose pipeline is gone gets its stopping time and a little more.
WAIT_S = lifetime.GRACE_S + 15.0
POLL_S = 0.2


class JobBusy(UserError):
    """Another live process writes the same output or checkpoint folder."""


def lock_path(path: str | Path) -> Path:
    """The lock of ``path``: a hidden sibling, never inside it (an output holds only its content)."""
    path = Path(path)
    return path.with_name(f".{path.name}{SUFFIX}")


@contextlib.contextmanager
def job_lock(path: str | Path, wait_s: float = WAIT_S) -> Iterator[None]:
    """Hold the lock of ``path`` for the body. Raises :class:`JobBusy` (one line naming the holder) when a live
    process holds it, after waiting up to ``wait_s`` for one whose pipeline is gone."""
    lock = lock_path(path)
    created = [folder for folder in (lock.parent, *lock.parent.parents) if not folder.exists()]
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        handle = _acquire(lock, Path(path), wait_s)
    except BaseException:
        _remove_empty(created)
        raise
    try:
        record_holder(handle, command=" ".join(["relin", *sys.argv[1:2]]),
                      pipeline=os.environ.get(lifetime.PIPELINE_ENV, ""))
        yield
    finally:
        lock.unlink(missing_ok=True)        # while still holding it: a waiter that opened this file retries
        handle.close()
        _remove_empty(created)


def _remove_empty(folders: list[Path]) -> None:
    """Remove the folders the lock created that stayed empty (deepest first): a refused stage leaves nothing behind."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:  # holds what the stage wrote, or another process's files
            return


def try_lock(path: Path) -> tuple[IO | None, str]:
    """Open ``path`` and take its ``flock`` without waiting: ``(handle, "")``, or ``(None, the holder's record)``."""
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        record = handle.read()
        handle.close()
        return None, record
    return handle, ""


def record_holder(handle: IO, **facts: str) -> None:
    """Write who holds a lock (this process, since when, and ``facts``) into its file, for whoever is refused."""
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), **facts}))
    handle.flush()


def _acquire(lock: Path, path: Path, wait_s: float) -> IO:
    deadline, announced = time.monotonic() + wait_s, False
    while True:
        handle, record = try_lock(lock)
        if handle is None:
            holder = _holder(record)
            stopping = bool(holder.get("pipeline")) and not _pipeline_alive(holder["pipeline"])
            if not stopping or time.monotonic() > deadline:
                raise JobBusy(_busy(path, holder, stopping)) from None
            if not announced:
                print(f"relin: {path} is still held by pid {holder.get('pid', '?')}, a job whose pipeline is no "
                      f"longer running; waiting up to {wait_s:.0f} s for it to stop", file=sys.stderr, flush=True)
                announced = True
            time.sleep(POLL_S)
            continue
        try:
            same = os.fstat(handle.fileno()).st_ino == lock.stat().st_ino
        except FileNotFoundError:
            same = False
        if same:
            return handle
        handle.close()                      # its holder removed that file on release: lock the one there now


def _holder(text: str) -> dict:
    try:
        info = json.loads(text)
    except json.JSONDecodeError:
        return {}
    return info if isinstance(info, dict) else {}


def _pipeline_alive(value: str) -> bool:
    """Whether the pipeline a holder recorded still runs (one on another host counts as running)."""
    pipeline = lifetime.exported_pipeline(value)
    return pipeline is None or lifetime.alive(*pipeline)


def _busy(path: Path, holder: dict, stopping: bool) -> str:
    who = (f"pid {holder['pid']} ({holder.get('command', 'a relin stage')}, since {holder.get('started', '?')})"
           if "pid" in holder else "another process")
    state = "did not stop within its grace time after its pipeline ended" if stopping else "is writing it now"
    stop = f"kill {holder['pid']}" if "pid" in holder else "stop it"
    return (f"{path}: {who} {state}; nothing was changed: wait for it to end, or {stop} and run again "
            f"(a stopped training stage resumes from its checkpoint)")
