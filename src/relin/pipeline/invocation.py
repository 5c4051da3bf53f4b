"""What happens when a ``snakemake`` invocation of the DAG starts and ends.

- **One pipeline at a time per checkout.** Snakemake locks only the outputs a run plans to write, and
  DVC deletes a stage's outputs before it runs; two runs in one directory can then take each other's
  inputs away. Every executing run holds ``.snakemake/relin-pipeline.lock`` (an ``flock``, freed by the
  kernel when its holder dies) for its whole life, from before Snakemake builds its DAG. ``relin run-job``,
  the command of every DVC stage, takes it before starting its Snakemake job, so ``dvc repro`` during a
  running ``snakemake`` (or the reverse) stops with one line and changes nothing.
- **Recovery** (:mod:`relin.pipeline.recovery`): holding that lock, a run knows that Snakemake's locks and incomplete
  markers in the checkout were left by killed runs; it removes the locks and rebuilds every missing or
  unfinished output of its DAG, so the one recovery command after a kill is the command that was killed.
- **Tracking** (:mod:`relin.tracking`): the store is checked once, the runs of dead invocations are
  closed, saved outbox writes are logged, and the parent run is created before any job starts.
- **A failed job says why on the console** (:func:`show_stage_errors`): the stage's own one-line error, read from
  its log, heads Snakemake's error block, which no longer repeats the job's command (its config JSON is in the log).
- **DVC agrees with Snakemake.** A run whose config is ``params.yaml`` itself (no overlay or ``--config``
  changed a value) first makes ``dvc.yaml`` the DAG of that ``params.yaml`` (:mod:`relin.pipeline.dvc_sync`), and
  after success commits the DVC stages of the jobs in its DAG (all up to date now) to ``dvc.lock`` in one
  pass (:mod:`relin.pipeline.dvc_lock`), so ``dvc status`` is clean and ``dvc repro`` has nothing to redo. Stages
  outside the DAG are left as they are: their outputs may predate a changed parameter.
"""
from __future__ import annotations

import fcntl
import json
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import IO, Iterable

from ..errors import UserError

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
    from .jobserver.job_lock import record_holder, try_lock

    path = Path(root) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, record = try_lock(path)
    if handle is None:
        raise PipelineBusy(f"another pipeline run holds {Path(root).resolve()} ({_holder(record)}); nothing was "
                           f"started or changed: wait for it to finish, then run again")
    record_holder(handle, command=shlex.join(sys.argv))
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


def lock_holder(root: str | Path = ".") -> str:
    """Who holds the checkout's pipeline lock, as recorded by its holder."""
    path = Path(root) / LOCK_FILE
    return _holder(path.read_text()) if path.is_file() else "holder unknown"


def _holder(text: str) -> str:
    try:
        info = json.loads(text)
        return f"pid {info['pid']} since {info['started']}: {info['command']}"
    except (json.JSONDecodeError, KeyError, TypeError):
        return "holder unknown"


def command_line_error(argv: list[str], configfiles: Iterable[str]) -> str | None:
    """What is wrong with a ``snakemake`` command line, in one line, or ``None``: ``--configfile`` given twice
    (argparse keeps the last: the overlays before it would be dropped silently), a target written after
    ``--configfile`` (which takes every word after it: the target's file, an output, was read as an overlay), or
    ``--unlock`` while a live run holds the checkout (its Snakemake locks are its own: a second run would take its
    outputs)."""
    if "--unlock" in argv and lock_held_elsewhere():
        return (f"--unlock: a running pipeline holds this checkout ({lock_holder()}); its locks end with it: nothing "
                f"was unlocked")
    if sum(arg.split("=")[0] in ("--configfile", "--configfiles") for arg in argv) > 1:
        return ("--configfile: given more than once, and Snakemake keeps only the last; expected the overlays after "
                "one --configfile (--configfile a.yaml b.yaml)")
    targets = [path for path in configfiles if Path(os.path.relpath(path)).parts[:1] == ("results",)]
    if not targets:
        return None
    words = [arg for arg in argv if os.path.relpath(arg) not in map(os.path.relpath, targets)]
    return (f"--configfile {' '.join(map(os.path.relpath, targets))}: a target (a DAG output), not a config overlay: "
            f"Snakemake reads every word after --configfile as one; put targets before the options: "
            f"{shlex.join(['snakemake', *map(os.path.relpath, targets), *words])}")


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
        Snakemake builds its DAG and locks its outputs (:func:`relin.pipeline.recovery.install`), so Snakemake locks and
        incomplete markers found while holding it were left by runs that are gone."""
        if self.takes_lock and self.lock is None:
            self.lock = acquire_lock()

    def before_dag(self) -> None:
        """Before Snakemake builds the DAG of an executing run: hold the lock, and when this run's config is
        ``params.yaml`` (it will record its stages in dvc.lock), make ``dvc.yaml`` the DAG of that ``params.yaml``
        (:func:`relin.pipeline.dvc_sync.sync`)."""
        from . import dvc_sync

        self.hold()
        if self.commits_dvc and (note := dvc_sync.sync()):
            print(f"relin: {note}", file=sys.stderr)

    def start(self) -> None:
        from .. import tracking
        from .jobserver.lifetime import export_pipeline
        from .jobserver.server import start_server

        self.hold()
        export_pipeline()       # every job watches this process and stops when it is gone (jobserver.lifetime)
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

    def stopped_on_request(self, workflow) -> bool:
        """Whether a failed run was stopped by SIGTERM (Snakemake let its running jobs finish, then stopped) with no
        job failed; if so one line says so and Snakemake's "At least one job did not complete successfully" is
        dropped."""
        scheduler = getattr(workflow, "scheduler", None)
        if scheduler is None or getattr(scheduler, "_user_kill", None) != "graceful" or scheduler.failed:
            return False
        left = sum(1 for _ in workflow.dag.needrun_jobs())
        print(f"relin: stopped on request (SIGTERM) once its running jobs had finished; {left} job(s) did not "
              f"start: the same command goes on from there", file=sys.stderr)
        HIDE_FINAL_ERROR.active = True
        for handler in logging.getLogger("snakemake.logging").handlers:
            handler.addFilter(HIDE_FINAL_ERROR)
        return True

    def end(self, status: str, dag_stages: Iterable[str] = ()) -> None:
        """``dag_stages``: the DVC stage names (:func:`dvc_stage_name`) of the jobs in this run's DAG."""
        from .. import tracking

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

    One pass whatever part of the DAG ran (:mod:`relin.pipeline.dvc_lock`: the stages collected once, the lock file read
    and written once; ``dvc commit`` with targets collects every stage again per target, minutes for a partial
    run). Entries of stages ``dvc.yaml`` no longer defines are dropped in the same write."""
    if not (root / ".dvc").is_dir():
        return
    in_dag = set(dag_stages)
    stages = [name for name, outs in dvc_stage_outputs(root).items() if name in in_dag and _finished(outs, root)]
    if not stages:
        return
    proc = subprocess.run([sys.executable, "-m", "relin.pipeline.dvc_lock", *stages], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "DVC_NO_ANALYTICS": "1"})
    if proc.returncode:
        lines = (proc.stderr.strip() or proc.stdout.strip()).splitlines()
        reason = lines[-1] if lines else f"relin.pipeline.dvc_lock exited with status {proc.returncode} and no message"
        print(f"relin: dvc.lock not updated ({reason}); `dvc status` lists the {len(stages)} stage(s) this run "
              f"finished as changed", file=sys.stderr)


class DvcYamlChanged(UserError):
    """``dvc repro`` planned from a ``dvc.yaml`` that was not the DAG of the current ``params.yaml``."""


def run_job(rule: str, targets: list[str]) -> int:
    """``relin run-job``: one Snakemake job for DVC, under the pipeline lock (see module docstring). DVC reads
    ``dvc.yaml`` as it is, so a ``params.yaml`` edited since it was generated (a bridge dropped) would run stages of
    the old DAG: the job first makes ``dvc.yaml`` current (:func:`.dvc_sync.sync`) and, when it changed, runs
    nothing and says to run ``dvc repro`` again (raises :class:`DvcYamlChanged`)."""
    from . import dvc_sync
    from .jobserver.lifetime import die_with_parent

    lock = acquire_lock()
    if note := dvc_sync.sync():
        raise DvcYamlChanged(f"{note}, after `dvc repro` had read the old one: nothing was run; run `dvc repro` "
                             f"(or `dvc status`) again on the new one")
    cmd = ["snakemake", *targets, "--cores", "all", "--forcerun", rule, "--allowed-rules", rule]
    env = {**os.environ, UNDER_RUN_JOB_ENV: "1"}
    os.set_inheritable(lock.fileno(), True)
    here = os.getpid()
    # a run-job killed outright (dvc repro killed) stops its Snakemake, which stops its job
    return subprocess.run(cmd, env=env, pass_fds=(lock.fileno(),), preexec_fn=lambda: die_with_parent(here)).returncode


# What a stage prints when it fails (relin.errors.reported), or the last line of an uncaught exception's traceback.
_ERROR_LINE = re.compile(r"^relin [\w-]+: (error|interrupted)\b|^relin: |^[\w.]*(Error|Exception|Interrupt)\b")
_LOG_TAIL = 1 << 16


def stage_error(logs: Iterable[str], rule: str) -> str | None:
    """The error a failed job's stage wrote last in its log (one line), ``None`` when its log ends otherwise (a job
    killed by a signal)."""
    for log in logs:
        try:
            with open(log, "rb") as handle:
                handle.seek(max(0, os.fstat(handle.fileno()).st_size - _LOG_TAIL))
                lines = handle.read().decode(errors="replace").splitlines()
        except OSError:
            continue
        last = next((line.strip() for line in reversed(lines) if line.strip()), "")
        if _ERROR_LINE.match(last):
            return last if last.startswith("relin") else f"relin: {rule} failed: {last}"
    return None


class _HideFinalError(logging.Filter):
    """Drops Snakemake's closing "At least one job did not complete successfully." of a run that stopped on request
    with no job failed (:meth:`Pipeline.stopped_on_request` says what happened instead)."""

    def __init__(self) -> None:
        super().__init__()
        self.active = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.active and "At least one job did not complete successfully" in str(record.msg))


HIDE_FINAL_ERROR = _HideFinalError()


# Where Snakemake's console would print a job's command or its params (the rule's config JSON: a screenful each).
_FAILED_COMMAND = re.compile(r"^Command '.*' (returned non-zero exit status \d+|died with <Signals\.\w+: \d+>)\.$",
                             re.M)
_PARAMS_CHANGED = re.compile(r"(Params have changed since last execution): .*?(?=; [A-Z]|$)", re.S)


class DropFailedCommand(logging.Filter):
    """Drops Snakemake's "CalledProcessError ... Command '<the job's command>' returned non-zero exit status N": the
    job error block after it names the rule and its log, headed by the stage's own line (:class:`ShortJobErrors`). A
    command killed by a signal (an OOM kill) is kept, its command shortened."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        return not ("CalledProcessError" in text
                    and re.search(r"^Command '.*' returned non-zero exit status \d+\.$", text, re.M))


class ShortJobErrors(logging.Formatter):
    """Snakemake's console formatter, its job errors headed by the stage's own line, without the job's command,
    inputs or changed params (the command holds the rule's config JSON: a screenful; all stay in Snakemake's log
    file and the job's log)."""

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self.inner = inner

    def format(self, record: logging.LogRecord) -> str:
        from snakemake.logging import get_event
        from snakemake_interface_logger_plugins.common import LogEvent

        event = get_event(record)
        if event == LogEvent.JOB_INFO and isinstance(getattr(record, "reason", None), str):
            return self.inner.format_job_info({**record.__dict__,
                                               "reason": _PARAMS_CHANGED.sub(r"\1", record.reason)})
        if event != LogEvent.JOB_ERROR:
            return _FAILED_COMMAND.sub(r"The job's command \1 (the command is in the job's log).",
                                       self.inner.format(record))
        msg = {**record.__dict__, "shellcmd": None, "input": []}
        block = self.inner.format_job_error(msg)
        line = stage_error(msg.get("log") or [], msg.get("rule_name", "a job"))
        return f"{line}\n{block}" if line else block


def show_stage_errors() -> None:
    """Give Snakemake's console handler :class:`ShortJobErrors` (call from the Snakefile: its handlers exist then)."""
    from snakemake.logging import DefaultFormatter

    for handler in logging.getLogger("snakemake.logging").handlers:
        if isinstance(handler.formatter, DefaultFormatter):
            handler.setFormatter(ShortJobErrors(handler.formatter))
            handler.addFilter(DropFailedCommand())
