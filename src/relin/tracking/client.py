"""How relin reaches the MLflow store: this process's tracking config, a quiet client, and retries of a store
that is busy or away (as opposed to one that refuses a request); with the tags that name who owns a run (the
commit, the host and the process), which let a later invocation close the runs of a killed one.

The tracking config travels to jobs as JSON in ``RELIN_TRACKING_CONFIG`` (set by the Snakefile), so
tracking options never change a stage's command line and never trigger a rerun.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time

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


def _experiment_id(client, name: str) -> str:
    exp = client.get_experiment_by_name(name)
    return exp.experiment_id if exp else client.create_experiment(name)


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
