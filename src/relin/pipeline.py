"""What happens when a ``snakemake`` invocation of the DAG starts and ends.

- **One pipeline at a time per checkout.** Snakemake locks only the outputs a run plans to write, and
  DVC deletes a stage's outputs before it runs; two runs in one directory can then take each other's
  inputs away. Every executing run holds ``.snakemake/relin-pipeline.lock`` (an ``flock``, freed by the
  kernel when its holder dies) for its whole life, from before Snakemake builds its DAG. ``relin run-job``,
  the command of every DVC stage, takes it before starting its Snakemake job, so ``dvc repro`` during a
  running ``snakemake`` (or the reverse) stops with one line and changes nothing.
- **Recovery** (:mod:`relin.recovery`): holding that lock, a run knows that Snakemake's locks and incomplete
  markers in the checkout were left by killed runs; it removes the locks and rebuilds every missing or
  unfinished output of its DAG, so the one recovery command after a kill is the command that was killed.
- **Tracking** (:mod:`relin.tracking`): the store is checked once, the runs of dead invocations are
  closed, saved outbox writes are logged, and the parent run is created before any job starts.
- **DVC agrees with Snakemake.** A run whose config is ``params.yaml`` itself (no overlay or ``--config``
  changed a value) first makes ``dvc.yaml`` the DAG of that ``params.yaml`` (:mod:`relin.dvc_sync`), and
  after success commits the DVC stages of the jobs in its DAG (all up to date now) to ``dvc.lock`` in one
  pass (:mod:`relin.dvc_lock`), so ``dvc status`` is clean and ``dvc repro`` has nothing to redo. Stages
  outside the DAG are left as they are: their outputs may predate a changed parameter.
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


def lock_held_elsewhere(root: str | Path = ".") -> bool:
    """Whether another process holds the checkout's pipeline lock now (a run in progress); creates nothing."""
    path = Path(root) / LOCK_FILE
    if not path.is_file():
        return False
    with path.open("r") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


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
        self.config_overridden = not commits_dvc and not under_run_job
        self.lock: IO | None = None
        self.parent_run = ""
        self.service = None
        self.jobs = None

    def hold(self) -> None:
        """Take the checkout's pipeline lock (once; raises :class:`PipelineBusy`). An executing run takes it before
        Snakemake builds its DAG and locks its outputs (:func:`relin.recovery.install`), so Snakemake locks and
        incomplete markers found while holding it were left by runs that are gone."""
        if self.takes_lock and self.lock is None:
            self.lock = acquire_lock()

    def before_dag(self) -> None:
        """Before Snakemake builds the DAG of an executing run: hold the lock, and when this run's config is
        ``params.yaml`` (it will record its stages in dvc.lock), make ``dvc.yaml`` the DAG of that ``params.yaml``
        (:func:`relin.dvc_sync.sync`)."""
        from . import dvc_sync

        self.hold()
        if self.commits_dvc and (note := dvc_sync.sync()):
            print(f"relin: {note}", file=sys.stderr)

    def start(self) -> None:
        from . import tracking
        from .jobserver.server import start_server

        self.hold()
        if self.takes_lock:     # under run-job (one DVC stage) the one job would only wait for the server's imports
            self.jobs = start_server()
        cfg = tracking.tracking_config()
        if not cfg.enabled:
            return
        if os.environ.get(tracking.PARENT_ENV):
            self.service = tracking.start_service(cfg)
            return  # a caller (a test, an outer tool) owns the parent run
        tracking.check_store(cfg)
        closed = tracking.close_dead_runs(cfg)
        if closed:
            print(f"relin: marked {len(closed)} MLflow run(s) of dead invocations KILLED", file=sys.stderr)
        if replayed := tracking.replay_outboxes(cfg):
            print(f"relin: logged {replayed} saved tracking outbox(es)", file=sys.stderr)
        self.parent_run = tracking.init_pipeline(cfg)
        os.environ[tracking.PARENT_ENV] = self.parent_run
        # The jobs' runs are written from here: no job pays for importing MLflow (relin.tracking.service).
        self.service = tracking.start_service(cfg)
        print(f"relin: MLflow parent run {self.parent_run}", file=sys.stderr)

    def end(self, status: str, dag_stages: Iterable[str] = ()) -> None:
        """``dag_stages``: the DVC stage names (:func:`dvc_stage_name`) of the jobs in this run's DAG."""
        from . import tracking

        if self.service is not None:
            self.service.close()
            self.service = None
        if self.jobs is not None:
            self.jobs.close()
            self.jobs = None
        if self.parent_run:
            tracking.end_pipeline(tracking.tracking_config(), self.parent_run, status)
        if status == "FINISHED" and self.commits_dvc:
            commit_dvc_stages(dag_stages)
        elif status == "FINISHED" and self.config_overridden:
            print("relin: dvc.lock not updated: an overlay or --config changed a value of params.yaml, and DVC "
                  "records only runs of params.yaml as it is", file=sys.stderr)


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
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # dvc.yaml lists every stage's source files: ~0.5 MB
    stages = (yaml.load(path.read_text(), Loader=loader) or {}).get("stages", {})
    return {name: [next(iter(o)) if isinstance(o, dict) else o
                   for key in ("outs", "metrics", "plots") for o in stage.get(key, [])]
            for name, stage in stages.items()}


def _finished(outs: list[str], root: Path) -> bool:
    return bool(outs) and all((root / o).exists() for o in outs)


def dvc_stages_with_outputs(root: Path = Path(".")) -> list[str]:
    """The ``dvc.yaml`` stages all of whose outputs exist."""
    return [name for name, outs in dvc_stage_outputs(root).items() if _finished(outs, root)]


def commit_dvc_stages(dag_stages: Iterable[str], root: Path = Path(".")) -> None:
    """Record the finished stages of a DAG in ``dvc.lock``; a warning naming DVC's reason, never a failure.

    One pass whatever part of the DAG ran (:mod:`relin.dvc_lock`: the stages collected once, the lock file read
    and written once; ``dvc commit`` with targets collects every stage again per target, minutes for a partial
    run). Entries of stages ``dvc.yaml`` no longer defines are dropped in the same write."""
    if not (root / ".dvc").is_dir():
        return
    in_dag = set(dag_stages)
    stages = [name for name, outs in dvc_stage_outputs(root).items() if name in in_dag and _finished(outs, root)]
    if not stages:
        return
    proc = subprocess.run([sys.executable, "-m", "relin.dvc_lock", *stages], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    if proc.returncode:
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        reason = lines[-1] if lines else f"relin.dvc_lock exited with status {proc.returncode} and no message"
        hint = ("; DVC needs a git repository: `git init`, or `dvc config core.no_scm true`"
                if "not a git repository" in reason else "")
        print(f"relin: dvc.lock not updated ({reason}{hint}); `dvc status` lists the {len(stages)} stage(s) this "
              f"run finished as changed", file=sys.stderr)
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
