"""A pipeline invocation's MLflow run, the parent of its stages' runs.

:func:`init_pipeline` creates the SQLite store, the experiment and the parent run once, before parallel jobs
start (concurrent first-time creation corrupts the store); :mod:`relin.pipeline.invocation` calls it when ``snakemake``
starts and exports the parent run id to every job through ``RELIN_PARENT_RUN_ID``. Before that,
:func:`check_store` refuses in one line an unreachable tracking server, or a SQLite store that does not exist (unless
``tracking.create_store``), and :func:`close_dead_runs` marks the runs of killed invocations ``KILLED``.
"""
from __future__ import annotations

import contextlib
import socket
import sys
from pathlib import Path

from ..config.tracking import DEFAULT_STORE, TrackingConfig
from ..errors import UserError
from .client import (
    CLOSE_PATIENCE_S,
    OPEN_PATIENCE_S,
    _client,
    _experiment_id,
    _first_line,
    _process_start,
    _process_tags,
    _retry,
    git_commit,
)


class TrackingUnavailable(UserError):
    """The tracking store cannot be reached (checked once when the pipeline starts)."""


def check_store(cfg: TrackingConfig, timeout_s: float = 5.0) -> None:
    """Raise :class:`TrackingUnavailable` (one line) when an HTTP tracking server does not answer, or a SQLite
    store's file is damaged or stays locked for ``timeout_s``."""
    uri = cfg.tracking_uri
    if not cfg.enabled:
        return
    if uri.startswith("sqlite:///"):
        path = Path(uri.removeprefix("sqlite:///").partition("?")[0])
        if not path.exists() and uri != DEFAULT_STORE and not cfg.create_store:
            where = "no such folder" if not path.parent.is_dir() else "no such file"
            raise TrackingUnavailable(f"tracking.tracking_uri {uri}: no MLflow store at {path} ({where}); expected "
                                      f"an existing store, or tracking.create_store: true to start a new one there")
        _check_sqlite(uri, max(timeout_s, 30.0))  # a stage ending may hold the write lock for a moment
        return
    if not uri.startswith(("http://", "https://")):
        return
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"{uri.rstrip('/')}/health", timeout=timeout_s) as reply:
            if reply.status == 200:
                return
            problem = f"HTTP {reply.status}"
    except (urllib.error.URLError, OSError) as err:
        problem = _first_line(getattr(err, "reason", err) if isinstance(err, urllib.error.URLError) else err)
    raise TrackingUnavailable(f"tracking.tracking_uri {uri}: no MLflow server answered within {timeout_s:.0f} s "
                              f"({problem}); start it (mlflow server --host 127.0.0.1) or set "
                              f"tracking.enabled: false")


def _check_sqlite(uri: str, timeout_s: float) -> None:
    """The store file reads as SQLite and takes a write lock within ``timeout_s`` (released at once)."""
    import sqlite3

    path = Path(uri.removeprefix("sqlite:///"))
    if not path.exists():
        return  # MLflow creates it
    advice = f"move it aside (mv {path} {path}.damaged) to start a new store, or set tracking.enabled: false"
    try:
        with contextlib.closing(sqlite3.connect(path, timeout=timeout_s, isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            db.execute("ROLLBACK")
    except sqlite3.OperationalError as err:
        if "locked" in str(err):
            raise TrackingUnavailable(f"tracking.tracking_uri {uri}: {path} stayed locked for {timeout_s:.0f} s "
                                      f"(another process is writing it: a running snakemake or relin stage?); "
                                      f"wait for it to end, or set tracking.enabled: false") from None
        raise TrackingUnavailable(f"tracking.tracking_uri {uri}: {path} is unreadable ({_first_line(err)}); "
                                  f"{advice}") from None
    except sqlite3.DatabaseError as err:
        raise TrackingUnavailable(f"tracking.tracking_uri {uri}: {path} is not an SQLite database "
                                  f"({_first_line(err)}); {advice}") from None


def init_pipeline(cfg: TrackingConfig, run_name: str = "pipeline", tags: dict[str, str] | None = None) -> str:
    """Create store, experiment and parent run (once, single process). Returns the parent run id."""
    if not cfg.enabled:
        return ""
    client = _client(cfg)
    exp_id = _retry(lambda: _experiment_id(client, cfg.experiment), OPEN_PATIENCE_S)
    # The UI picks its view by this tag (otherwise it guesses): runs, metrics and models, not GenAI traces.
    _retry(lambda: client.set_experiment_tag(exp_id, "mlflow.experimentKind", "custom_model_development"),
           OPEN_PATIENCE_S)
    run = _retry(lambda: client.create_run(exp_id, run_name=run_name, tags={
        "relin.kind": "pipeline", "mlflow.source.git.commit": git_commit(), **_process_tags(), **(tags or {})}),
        OPEN_PATIENCE_S)
    return run.info.run_id


def end_pipeline(cfg: TrackingConfig, run_id: str, status: str = "FINISHED") -> None:
    if cfg.enabled and run_id:
        client = _client(cfg)
        try:
            _retry(lambda: client.set_terminated(run_id, status=status), CLOSE_PATIENCE_S)
        except Exception as err:  # noqa: BLE001 - the next invocation closes it (close_dead_runs)
            print(f"relin: could not end MLflow run {run_id} ({_first_line(err)})", file=sys.stderr)


def close_dead_runs(cfg: TrackingConfig) -> list[str]:
    """Mark ``KILLED`` the runs still ``RUNNING`` whose owning process on this host is gone."""
    if not cfg.enabled:
        return []
    client = _client(cfg)
    exp = _retry(lambda: client.get_experiment_by_name(cfg.experiment), OPEN_PATIENCE_S)
    if exp is None:
        return []
    runs = _retry(lambda: client.search_runs([exp.experiment_id], "attributes.status = 'RUNNING'",
                                             max_results=10000), OPEN_PATIENCE_S)
    host, closed = socket.gethostname(), []
    for run in runs:
        tags = run.data.tags
        if tags.get("relin.host") != host or not tags.get("relin.pid", "").isdigit():
            continue
        started = _process_start(int(tags["relin.pid"]))
        if started is not None and str(started) == tags.get("relin.pid_started"):
            continue  # its process still runs
        _retry(lambda: client.set_terminated(run.info.run_id, status="KILLED"), OPEN_PATIENCE_S)
        closed.append(run.info.run_id)
    return closed
