"""A job lives no longer than the pipeline that started it.

``kill -9`` of ``snakemake`` alone runs no handler: its jobs (the ``relin <stage>`` command, the job server and the
child it forked) would keep training, and the next run would start the same job beside them. The pipeline exports
who it is (:func:`export_pipeline`: host, pid and start time, so a reused pid is not mistaken for it) and every stage
process watches it (:func:`watch_pipeline`): once it is gone the stage is stopped as Snakemake stops a job, with
SIGTERM (its MLflow run is closed ``KILLED``, its checkpoints stay), and killed outright after :data:`GRACE_S`. The
job server, the pipeline's own child, dies with it through the kernel's parent-death signal
(:func:`die_with_parent`). A stage on another host (a cluster job) or run by hand watches nothing.
"""
from __future__ import annotations

import os
import select
import signal
import socket
import sys
import threading
import time

PIPELINE_ENV = "RELIN_PIPELINE"
# How long a stopped job may take to close its run and release its outputs before it is killed.
GRACE_S = 30.0
POLL_S = 1.0


def process_start(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch, to 10 ms); ``None`` when there is none."""
    import psutil

    try:
        return round(psutil.Process(pid).create_time(), 2)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def export_pipeline() -> str:
    """Name this process as the pipeline of the jobs it starts (``RELIN_PIPELINE``); returns the value."""
    value = f"{socket.gethostname()}:{os.getpid()}:{process_start(os.getpid())}"
    os.environ[PIPELINE_ENV] = value
    return value


def exported_pipeline(value: str | None = None) -> tuple[int, str] | None:
    """The pipeline named by ``value`` (default: this process's ``RELIN_PIPELINE``) as ``(pid, start)`` when it is
    on this host; ``None`` for none, another host's, or a malformed value."""
    host, _, rest = (os.environ.get(PIPELINE_ENV, "") if value is None else value).partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return None
    return int(pid), start


def alive(pid: int, start: str) -> bool:
    """Whether process ``pid`` runs and is the one that started at ``start`` (not a later one given its pid)."""
    return str(process_start(pid)) == start


def watch_pipeline(grace_s: float = GRACE_S) -> bool:
    """In a stage process: stop it (SIGTERM, then SIGKILL after ``grace_s``) once its pipeline is gone. Returns
    whether a pipeline is watched."""
    pipeline = exported_pipeline()
    if pipeline is None:
        return False
    threading.Thread(target=_stop_when_gone, args=(*pipeline, grace_s), daemon=True,
                     name="relin-pipeline-watch").start()
    return True


def _stop_when_gone(pid: int, start: str, grace_s: float) -> None:
    wait_for_exit(pid, start)
    print(f"relin: the pipeline that started this job (pid {pid}) is gone; the job stops", file=sys.stderr,
          flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace_s)
    os.kill(os.getpid(), signal.SIGKILL)


def wait_for_exit(pid: int, start: str) -> None:
    """Return once process ``pid`` (started at ``start``) has ended: at once through a pidfd, else by polling."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):  # no pidfd here (an old kernel, a sandbox), or the process is gone already
        pidfd = None
    try:
        if not alive(pid, start):       # checked after the pidfd is open: that pidfd is of the pipeline's process
            return
        if pidfd is not None:
            select.select([pidfd], [], [])  # readable once the process has exited
            return
        while alive(pid, start):
            time.sleep(POLL_S)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def die_with_parent(parent: int, sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent exits (Linux ``PR_SET_PDEATHSIG``, kept across
    ``exec``), and send it now when the parent, ``parent``, is gone already (it may have died before the request).
    Elsewhere: nothing."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0)      # 1: PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)
