"""What happens when a ``snakemake`` invocation of the DAG starts and ends.

- **One pipeline at a time per checkout.** Snakemake locks only the outputs a run plans to write, and
  DVC deletes a stage's outputs before it runs; two runs in one directory can then take each other's
  inputs away. Every run holds ``.snakemake/relin-pipeline.lock`` (an ``flock``, freed by the kernel
  when its holder dies) for its whole life. ``relin run-job``, the command of every DVC stage, takes
  it before starting its Snakemake job, so ``dvc repro`` during a running ``snakemake`` (or the
  reverse) stops with one line and changes nothing.
- **Tracking** (:mod:`relin.tracking`): the store is checked once, the runs of dead invocations are
  closed, saved outbox writes are logged, and the parent run is created before any job starts.
- **DVC agrees with Snakemake.** After a successful run whose config is ``params.yaml`` itself (no
  overlay or ``--config`` changed a value), the DVC stages of the jobs in its DAG (all up to date
  now) are committed to ``dvc.lock``, so ``dvc status`` is clean and ``dvc repro`` has nothing to
  redo. Stages outside the DAG are left as they are: their outputs may predate a changed parameter.
"""
from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Iterable

from .errors import UserError

LOCK_FILE = Path(".snakemake/relin-pipeline.lock")
# Set by ``relin run-job`` for the Snakemake it starts: the lock is already held (and inherited),
# and DVC, not Snakemake's end hook, records the stage in dvc.lock.
UNDER_RUN_JOB_ENV = "RELIN_UNDER_RUN_JOB"


class PipelineBusy(UserError):
    """Another pipeline run holds this checkout."""


def acquire_lock(root: str | Path = ".") -> IO:
    """Hold the checkout's pipeline lock (until the returned file is closed or the process ends).

    Raises :class:`PipelineBusy` with one line naming the holder when another process has it.
    """
    path = Path(root) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = _holder(handle.read())
        handle.close()
        raise PipelineBusy(f"another pipeline run holds {Path(root).resolve()} ({holder}); nothing was started "
                           f"or changed: wait for it to finish, then run again") from None
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps({"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                             "command": shlex.join(sys.argv)}))
    handle.flush()
    return handle


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} since {info['started']}: {info['command']}"
    except (json.JSONDecodeError, KeyError, TypeError):
        return "holder unknown"


class Pipeline:
    """The start and end hooks of one ``snakemake`` invocation (``onstart`` / ``onsuccess`` / ``onerror``)."""

    def __init__(self, commits_dvc: bool) -> None:
        """``commits_dvc``: this run's config is ``params.yaml`` as DVC reads it (no overlay changed it)."""
        under_run_job = bool(os.environ.get(UNDER_RUN_JOB_ENV))
        self.commits_dvc = commits_dvc and not under_run_job
        self.takes_lock = not under_run_job
        self.lock: IO | None = None
        self.parent_run = ""

    def start(self) -> None:
        from . import tracking

        if self.takes_lock:
            self.lock = acquire_lock()
        if os.environ.get(tracking.PARENT_ENV):
            return  # a caller (a test, an outer tool) owns the parent run
        cfg = tracking.tracking_config()
        if not cfg.enabled:
            return
        tracking.check_store(cfg)
        closed = tracking.close_dead_runs(cfg)
        if closed:
            print(f"relin: marked {len(closed)} MLflow run(s) of dead invocations KILLED", file=sys.stderr)
        if replayed := tracking.replay_outboxes(cfg):
            print(f"relin: logged {replayed} saved tracking outbox(es)", file=sys.stderr)
        self.parent_run = tracking.init_pipeline(cfg)
        os.environ[tracking.PARENT_ENV] = self.parent_run
        print(f"relin: MLflow parent run {self.parent_run}", file=sys.stderr)

    def end(self, status: str, dag_stages: Iterable[str] = ()) -> None:
        """``dag_stages``: the DVC stage names (:func:`dvc_stage_name`) of the jobs in this run's DAG."""
        from . import tracking

        if self.parent_run:
            tracking.end_pipeline(tracking.tracking_config(), self.parent_run, status)
        if status == "FINISHED" and self.commits_dvc:
            commit_dvc_stages(dag_stages)


def dvc_stage_name(rule: str, wildcards: dict) -> str:
    """The ``dvc.yaml`` stage of one Snakemake job: its rule and non-empty wildcard values joined by "-" (DVC
    stage names allow only letters, digits, "_" and "-"; a replica's ``-s<seed>`` keeps one dash)."""
    return "-".join([rule, *(str(v).lstrip("-") for v in wildcards.values() if str(v))])


def dvc_stage_outputs(root: Path = Path(".")) -> dict[str, list[str]]:
    """Every ``dvc.yaml`` stage and the paths it declares as outputs (outs, metrics, plots)."""
    import yaml

    path = root / "dvc.yaml"
    if not path.is_file():
        return {}
    stages = (yaml.safe_load(path.read_text()) or {}).get("stages", {})
    return {name: [next(iter(o)) if isinstance(o, dict) else o
                   for key in ("outs", "metrics", "plots") for o in stage.get(key, [])]
            for name, stage in stages.items()}


def _finished(outs: list[str], root: Path) -> bool:
    return bool(outs) and all((root / o).exists() for o in outs)


def dvc_stages_with_outputs(root: Path = Path(".")) -> list[str]:
    """The ``dvc.yaml`` stages all of whose outputs exist."""
    return [name for name, outs in dvc_stage_outputs(root).items() if _finished(outs, root)]


def commit_dvc_stages(dag_stages: Iterable[str], root: Path = Path(".")) -> None:
    """Record the stages of a finished DAG in ``dvc.lock`` (``dvc commit``); a warning, never a failure.

    With every stage of ``dvc.yaml`` to record, one ``dvc commit`` without targets reads and writes
    ``dvc.lock`` once; ``dvc commit`` with targets collects every stage again per target (minutes for a partial
    run), so those go through :mod:`relin.dvc_lock`, which collects them once."""
    if not (root / ".dvc").is_dir():
        return
    every = dvc_stage_outputs(root)
    in_dag = set(dag_stages)
    stages = [name for name, outs in every.items() if name in in_dag and _finished(outs, root)]
    if not stages:
        return
    command = (["dvc", "commit", "--force", "--quiet"] if len(stages) == len(every)
               else [sys.executable, "-m", "relin.dvc_lock", *stages])
    proc = subprocess.run(command, cwd=root, capture_output=True, text=True,
                          env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    if proc.returncode:
        reason = (proc.stderr.strip() or proc.stdout.strip() or "no output").splitlines()[0]
        print(f"relin: dvc.lock not updated ({reason}); `dvc status` may list these stages", file=sys.stderr)
    elif autostage(root):
        # `dvc commit` does not autostage (dvc repro does): stage the lock file as DVC's setting asks.
        subprocess.run(["git", "add", "dvc.lock"], cwd=root, capture_output=True)


def autostage(root: Path) -> bool:
    """DVC's ``core.autostage`` setting of the repository at ``root``."""
    import configparser

    config = configparser.ConfigParser()
    config.read(root / ".dvc" / "config")
    return config.getboolean("core", "autostage", fallback=False)


def run_job(rule: str, targets: list[str]) -> int:
    """``relin run-job``: one Snakemake job for DVC, under the pipeline lock (see module docstring)."""
    lock = acquire_lock()
    cmd = ["snakemake", *targets, "--cores", "all", "--forcerun", rule, "--allowed-rules", rule]
    env = {**os.environ, UNDER_RUN_JOB_ENV: "1"}
    os.set_inheritable(lock.fileno(), True)
    return subprocess.run(cmd, env=env, pass_fds=(lock.fileno(),)).returncode
