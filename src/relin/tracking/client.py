"""How relin reaches the MLflow store: this process's tracking config, a quiet client, and retries of a store
that is busy or away (as opposed to one that refuses a request); with the tags that name who owns a run (the
commit, the host and the process), which let a later invocation close the runs of a killed one.

The tracking config travels to jobs as JSON in ``RELIN_TRACKING_CONFIG`` (set by the Snakefile), so
tracking options never change a stage's command line and never trigger a rerun.
"""
from __future__ import annotations

import contextlib
import json
import os
import posixpath
import socket
import sqlite3
import subprocess
import time
from pathlib import Path

from ..config.loader import build
from ..config.tracking import TrackingConfig

CONFIG_ENV = "RELIN_TRACKING_CONFIG"

# How long a write may keep retrying a busy store: when a run is opened (its id goes into the
# outputs' manifests), in the background writer (then it waits RETRY_EVERY_S), and when a stage ends.
OPEN_PATIENCE_S = 60.0
STEP_PATIENCE_S = 0.0
CLOSE_PATIENCE_S = 120.0


def _quiet_mlflow_env() -> None:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")
    # MLflow's HTTP client retries 7 times with backoff (minutes against a dead server); the outbox
    # retries instead, without holding up the stage.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")


def tracking_config() -> TrackingConfig:
    """The tracking config of this process: from ``RELIN_TRACKING_CONFIG`` or the defaults."""
    raw = json.loads(os.environ.get(CONFIG_ENV, "{}") or "{}")
    cfg = build(TrackingConfig, raw, "tracking")
    if os.environ.get("RELIN_TRACKING", "1") == "0":
        cfg.enabled = False
    return cfg


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _process_tags() -> dict[str, str]:
    """Who owns a run: a later invocation marks it KILLED once this process is gone."""
    return {"relin.host": socket.gethostname(), "relin.pid": str(os.getpid()),
            "relin.pid_started": str(_process_start(os.getpid()))}


def _process_start(pid: int) -> float | None:
    import psutil

    try:
        return round(psutil.Process(pid).create_time(), 2)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def is_transient(err: BaseException) -> bool:
    """A store that is busy or away (retry later), as opposed to a request it refuses (drop it)."""
    text = f"{type(err).__name__}: {err}".lower()
    markers = ("database is locked", "database table is locked", "unable to open database", "operationalerror",
               "connection", "timed out", "timeout", "temporarily unavailable", "max retries", "503", "502")
    return isinstance(err, (OSError, TimeoutError)) or any(m in text for m in markers)


def _client(cfg: TrackingConfig):
    _quiet_mlflow_env()
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=cfg.tracking_uri)


def start_system_metrics(tracking_uri: str, run_id: str, interval_s: float):
    """MLflow's sampler of the machine's CPU, memory, disk, network and GPUs, logging into ``run_id`` every
    ``interval_s`` seconds; started (``finish()`` stops it)."""
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    sampler = SystemMetricsMonitor(run_id, sampling_interval=interval_s, tracking_uri=tracking_uri)
    sampler.start()
    return sampler


def _experiment_id(client, name: str) -> str:
    """The experiment's id (created when missing), its artifact locations under :func:`artifact_root`."""
    exp = client.get_experiment_by_name(name)
    exp_id = exp.experiment_id if exp else client.create_experiment(name)
    root = artifact_root(client.tracking_uri)
    if root is not None and (exp is None or exp.artifact_location != f"{root}/{exp_id}"):
        relocate_artifacts(client.tracking_uri)
    return exp_id


def artifact_root(tracking_uri: str) -> str | None:
    """Where a SQLite store's runs keep their artifacts: ``mlruns`` beside the database file, written the way the
    URI writes the file (``sqlite:///mlflow.db`` -> ``mlruns``), so that a relative store, found from the project's
    folder, finds its artifacts there too after the project moves. ``None`` for a server or another database."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return posixpath.join(posixpath.dirname(_sqlite_file(tracking_uri)), "mlruns")


def _sqlite_file(tracking_uri: str) -> str:
    return tracking_uri.removeprefix("sqlite:///").partition("?")[0]


# What holds an artifact location in MLflow's schema, per experiment.
_LOCATION_COLUMNS = (("experiments", "artifact_location"), ("runs", "artifact_uri"),
                     ("logged_models", "artifact_location"))


def relocate_artifacts(tracking_uri: str) -> int:
    """Rewrite a SQLite store's artifact locations to :func:`artifact_root` where they name the ``mlruns`` folder
    of the place the store was moved or copied from (MLflow writes absolute paths): a folder that is gone, or one
    with a store of the same name beside it. Locations elsewhere (another disk, a bucket) stay. Returns how many
    experiments moved."""
    root = artifact_root(tracking_uri)
    db_file = Path(_sqlite_file(tracking_uri)) if root is not None else None
    if db_file is None or not db_file.is_file():
        return 0
    moved = 0
    with contextlib.closing(sqlite3.connect(db_file, timeout=60)) as db, db:
        for exp_id, location in db.execute("SELECT experiment_id, artifact_location FROM experiments").fetchall():
            old = _moved_root(location or "", str(exp_id), root, db_file.name)
            if old is None:
                continue
            for table, column in _LOCATION_COLUMNS:
                rows = db.execute(f"SELECT rowid, {column} FROM {table} WHERE experiment_id = ?", (exp_id,))
                for rowid, uri in rows.fetchall():
                    path = (uri or "").removeprefix("file://")
                    if path == old or path.startswith(old + "/"):
                        db.execute(f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (root + path[len(old):], rowid))
            moved += 1
    return moved


def _moved_root(location: str, exp_id: str, root: str, db_name: str) -> str | None:
    """The ``.../mlruns`` prefix of an experiment's ``location`` when it is to be rewritten to ``root``."""
    path = location.removeprefix("file://")
    if path == f"{root}/{exp_id}" or not path.endswith(f"/{exp_id}"):
        return None
    old = path[:-len(exp_id) - 1]
    if posixpath.basename(old) != "mlruns":
        return None  # a location someone chose
    same = os.path.abspath(old) == os.path.abspath(root)
    left = not os.path.exists(old) or os.path.isfile(os.path.join(os.path.dirname(old), db_name))
    return old if same or left else None


def project_path(path: str | Path) -> str:
    """``path`` relative to the working directory (the project, where stages run) when inside it: what MLflow
    records of an input still names it after the project moves."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def _retry(fn, patience_s: float):
    """``fn()``, retried with backoff on transient errors for up to ``patience_s`` seconds."""
    deadline, pause = time.monotonic() + patience_s, 0.5
    while True:
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - classified just below
            if not is_transient(err) or time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 8.0)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__
