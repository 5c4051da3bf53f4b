"""The one MLflow seam: a parent run per pipeline invocation, a child run per stage, lineage inputs.

- :func:`init_pipeline` creates the SQLite store, the experiment and the parent run once, before
  parallel jobs start (concurrent first-time creation corrupts the store); :mod:`relin.pipeline`
  calls it when ``snakemake`` starts and exports the parent run id to every job through
  ``RELIN_PARENT_RUN_ID``. Before that, :func:`check_store` refuses an unreachable tracking server
  in one line, :func:`close_dead_runs` marks the runs of killed invocations ``KILLED`` and
  :func:`replay_outboxes` logs what earlier stages could not.
- :func:`stage_run` opens a stage's child run and returns a :class:`Tracker`: params, per-step
  metrics (buffered, written with one batched call), artifacts, system metrics, the git commit, and
  as inputs the artifacts the stage read, with their digests and the run ids that produced them.
- Every model a stage writes is a logged model of its run (:meth:`Tracker.log_model`, MLflow 3's
  ``LoggedModel``): its type, size and path, the run's final metrics linked to it and to the dataset
  it trained on; the weights stay in ``results/`` (DVC holds them), not copied.
- Tracking never stops training. Every write goes through an outbox: a busy store (a locked SQLite
  file, a server that does not answer) is retried in the background of the step loop, and what is
  still unwritten when the stage ends is saved under ``logs/tracking-outbox/`` and logged by the
  next pipeline invocation.
- With tracking disabled (``tracking.enabled: false`` or ``RELIN_TRACKING=0``), or on a non-zero
  rank, the same calls go to :class:`NullTracker` and nothing touches MLflow.

The tracking config travels to jobs as JSON in ``RELIN_TRACKING_CONFIG`` (set by the Snakefile), so
tracking options never change a stage's command line and never trigger a rerun.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any, Iterator

from ..config.loader import build
from ..config.tracking import TrackingConfig
from ..errors import UserError
from ..io import atomic_write_json, clear_orphan_manifest, digest, manifest_path, read_manifest
from ..ranks import dist_env

PARENT_ENV = "RELIN_PARENT_RUN_ID"
CONFIG_ENV = "RELIN_TRACKING_CONFIG"
OUTBOX_DIR = Path("logs/tracking-outbox")

# How long a write may keep retrying a busy store: when a run is opened (its id goes into the
# outputs' manifests), in the background writer (then it waits RETRY_EVERY_S), and when a stage ends.
OPEN_PATIENCE_S = 60.0
STEP_PATIENCE_S = 0.0
CLOSE_PATIENCE_S = 120.0
RETRY_EVERY_S = 15.0


class TrackingUnavailable(UserError):
    """The tracking store cannot be reached (checked once when the pipeline starts)."""


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


# ------------------------------------------------------------------------------------ the outbox


def _apply(client, op: dict[str, Any], run_id: str | None) -> str | None:
    """Carry out one outbox entry; returns the run id (set by ``create_run``)."""
    from mlflow.entities import Metric, Param, RunTag

    kind = op["op"]
    if kind == "create_run":
        run = client.create_run(_experiment_id(client, op["experiment"]), run_name=op["run_name"], tags=op["tags"])
        return run.info.run_id
    if run_id is None:
        raise RuntimeError(f"outbox entry {kind} has no run (its create_run was lost)")
    if kind == "log_batch":
        client.log_batch(run_id, metrics=[Metric(k, v, ts, step) for k, v, ts, step in op.get("metrics", [])],
                         params=[Param(k, v) for k, v in op.get("params", [])],
                         tags=[RunTag(k, v) for k, v in op.get("tags", [])])
    elif kind == "log_input":
        try:
            client.log_inputs(run_id, datasets=[_dataset_input(op)])
        except Exception as err:  # noqa: BLE001 - only the race below is retried
            # Stages that read one artifact at once insert the same dataset row; the loser breaks its
            # unique key, and a second attempt links the row the winner wrote.
            if "UNIQUE constraint failed: datasets" not in str(err):
                raise
            client.log_inputs(run_id, datasets=[_dataset_input(op)])
    elif kind == "log_artifact":
        path = Path(op["path"])
        if path.is_dir():
            client.log_artifacts(run_id, str(path), op.get("artifact_path"))
        elif path.is_file():
            client.log_artifact(run_id, str(path), op.get("artifact_path"))
    elif kind == "log_model":
        _log_model(client, op, run_id)
    elif kind == "terminate":
        client.set_terminated(run_id, status=op["status"])
    else:
        raise ValueError(f"unknown outbox entry {kind!r}")
    return run_id


def _log_model(client, op: dict[str, Any], run_id: str) -> None:
    """A ``LoggedModel`` of run ``run_id`` (created, its metrics linked, finalised READY)."""
    from mlflow.entities import Metric

    experiment_id = client.get_run(run_id).info.experiment_id
    model = client.create_logged_model(experiment_id, name=op["name"], source_run_id=run_id, tags=op["tags"],
                                       params=op["params"], model_type=op["model_type"])
    dataset = op.get("dataset") or {}
    metrics = [Metric(k, v, op["timestamp"], op.get("step", 0), model_id=model.model_id, run_id=run_id,
                      dataset_name=dataset.get("name"), dataset_digest=dataset.get("digest"))
               for k, v in op["metrics"].items()]
    if metrics:
        client.log_batch(run_id, metrics=metrics)
    client.finalize_logged_model(model.model_id, "READY")


def _dataset_input(op: dict[str, Any]):
    import warnings

    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.data.meta_dataset import MetaDataset
    from mlflow.entities import DatasetInput, InputTag

    with warnings.catch_warnings():  # "source can be interpreted in multiple ways": harmless
        warnings.simplefilter("ignore")
        source = resolve_dataset_source(op["source"])
    dataset = MetaDataset(source=source, name=op["name"], digest=op["digest"])
    tags = [InputTag("mlflow.data.context", "input")]
    if op.get("producer_run_id"):
        tags += [InputTag("relin.producer_run_id", op["producer_run_id"]),
                 InputTag("relin.producer_stage", op.get("producer_stage", ""))]
    return DatasetInput(dataset._to_mlflow_entity(), tags)


class NullTracker:
    """Tracking switched off: every call is accepted and does nothing (facts still reach manifests)."""

    run_id = ""

    def __init__(self) -> None:
        self.facts: dict[str, Any] = {}

    def log_params(self, params: dict[str, Any]) -> None: ...
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...
    def log_input(self, path: str | Path, name: str | None = None) -> None: ...
    def set_tags(self, tags: dict[str, str]) -> None: ...
    def flush(self) -> None: ...
    def log_model(self, path: str | Path, name: str, model_type: str, params: dict[str, Any] | None = None,
                  metrics: dict[str, float] | None = None, dataset: str | Path | None = None) -> None: ...

    def record(self, facts: dict[str, Any]) -> None:
        """Facts of this run that are not part of any output (wall time, the step it resumed from):
        logged as metrics and written into the outputs' manifests, never into the outputs."""
        self.facts.update(facts)
        self.log_metrics({k: v for k, v in facts.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})


class Tracker(NullTracker):
    """A stage's child run. Writes queue in an outbox that a background thread drains in order, so a
    busy store (MLflow waits up to 20 s on a locked SQLite file per statement) never holds up training.
    """

    def __init__(self, cfg: TrackingConfig, stage: str, tags: dict[str, str]):
        super().__init__()
        self.cfg, self.stage = cfg, stage
        self.run_id = ""
        self._client = None
        self._ops: deque[dict[str, Any]] = deque()
        self._pending_metrics: list[list] = []
        self._input_digests: dict[str, str] = {}
        self._wake = threading.Condition()
        self._stopping = self._gave_up = False
        self._warned = False
        self._ops.append({"op": "create_run", "experiment": cfg.experiment, "run_name": stage, "tags": tags})
        self._write_head(OPEN_PATIENCE_S)  # the run id goes into the outputs' manifests: wait for it
        self._worker = threading.Thread(target=self._drain, name=f"relin-tracking-{stage}", daemon=True)
        self._worker.start()

    # -- the outbox
    def _write_head(self, patience_s: float) -> bool:
        """Write the oldest queued entry; ``False`` when the store is busy (the entry stays queued)."""
        op = self._ops[0]
        try:
            if self._client is None:
                self._client = _client(self.cfg)
            run_id = _retry(lambda: _apply(self._client, op, self.run_id or None), patience_s)
        except Exception as err:  # noqa: BLE001 - tracking must never stop the stage
            if is_transient(err):
                if not self._warned:
                    print(f"relin: tracking store busy ({_first_line(err)}); writes are queued and retried",
                          file=sys.stderr)
                    self._warned = True
                return False
            print(f"relin: tracking: dropped a {op['op']} the store refused ({_first_line(err)})", file=sys.stderr)
        else:
            if op["op"] == "create_run":
                self.run_id = run_id
            if self._warned:
                print("relin: tracking store answers again; queued writes are being logged", file=sys.stderr)
                self._warned = False
        with self._wake:
            self._ops.popleft()
            self._wake.notify_all()
        return True

    def _drain(self) -> None:
        """The background writer: entries in order, retried every ``RETRY_EVERY_S`` while the store is busy."""
        while True:
            with self._wake:
                while not self._ops and not self._stopping:
                    self._wake.wait()
                if not self._ops or (self._stopping and self._gave_up):
                    return
            if not self._write_head(STEP_PATIENCE_S):
                with self._wake:
                    if not self._stopping or not self._gave_up:
                        self._wake.wait(RETRY_EVERY_S)

    def _push(self, op: dict[str, Any]) -> None:
        with self._wake:
            self._ops.append(op)
            self._wake.notify_all()

    # -- the tracker API
    def log_params(self, params: dict[str, Any]) -> None:
        items = [[k, str(v)[:6000]] for k, v in _flatten(params).items()]
        for i in range(0, len(items), 100):
            self._push({"op": "log_batch", "params": items[i:i + 100]})

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        now = int(time.time() * 1000)
        self._pending_metrics += [[k, float(v), now, step or 0] for k, v in metrics.items()]
        if len(self._pending_metrics) >= self.cfg.flush_every:
            self.flush()

    def flush(self) -> None:
        metrics, self._pending_metrics = self._pending_metrics, []
        for i in range(0, len(metrics), 1000):
            self._push({"op": "log_batch", "metrics": metrics[i:i + 1000]})

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._push({"op": "log_artifact", "path": str(Path(path).resolve()), "artifact_path": artifact_path})

    def log_input(self, path: str | Path, name: str | None = None) -> None:
        """Record an artifact this stage read: its digest and the run that produced it."""
        path = Path(path)
        producer = read_manifest(path)
        self._input_digests[str(path)] = digest(path)[:36]
        self._push({"op": "log_input", "source": str(path.resolve()), "name": name or str(path),
                    "digest": self._input_digests[str(path)], "producer_run_id": producer.get("run_id", ""),
                    "producer_stage": producer.get("stage", "")})

    def set_tags(self, tags: dict[str, str]) -> None:
        self._push({"op": "log_batch", "tags": [[k, str(v)] for k, v in tags.items()]})

    def log_model(self, path: str | Path, name: str, model_type: str, params: dict[str, Any] | None = None,
                  metrics: dict[str, float] | None = None, dataset: str | Path | None = None) -> None:
        """Register the model saved at ``path`` (a directory this stage wrote) as a logged model of this run:
        ``name`` and ``model_type`` for the UI's model list, ``params``, ``metrics`` (scalars), and ``dataset``,
        the input it was trained on (its digest, as the run's input records it)."""
        op = {"op": "log_model", "name": name, "model_type": model_type, "timestamp": int(time.time() * 1000),
              "tags": {"relin.path": str(path), "relin.stage": self.stage},
              "params": {k: str(v)[:6000] for k, v in _flatten(params or {}).items()},
              "metrics": {k: float(v) for k, v in (metrics or {}).items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)}}
        if dataset is not None:
            op["dataset"] = {"name": str(dataset),
                             "digest": self._input_digests.get(str(dataset)) or digest(Path(dataset))[:36]}
        self._push(op)

    def close(self, status: str) -> None:
        """Flush and end the run, waiting up to ``CLOSE_PATIENCE_S`` for a busy store; what it still
        refuses is saved under ``logs/tracking-outbox/`` for the next pipeline invocation."""
        self.flush()
        self._push({"op": "terminate", "status": status})
        deadline = time.monotonic() + CLOSE_PATIENCE_S
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
            while self._ops and time.monotonic() < deadline:
                self._wake.wait(min(1.0, max(deadline - time.monotonic(), 0.01)))
            self._gave_up = bool(self._ops)
            self._wake.notify_all()
        self._worker.join()  # a write in flight ends within the store's own timeout
        if not self._ops:
            return
        OUTBOX_DIR.mkdir(parents=True, exist_ok=True)
        path = OUTBOX_DIR / f"{self.stage}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        atomic_write_json(path, {"tracking_uri": self.cfg.tracking_uri, "run_id": self.run_id,
                                 "ops": list(self._ops)})
        print(f"relin: tracking store still busy after {CLOSE_PATIENCE_S:.0f} s; {len(self._ops)} write(s) saved "
              f"to {path}, logged when the next pipeline starts", file=sys.stderr)


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0][:200] if text else type(err).__name__


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, dict):
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM (Snakemake stopping its jobs) unwinds like Ctrl-C, so the run is closed as KILLED."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def stage_run(stage: str, params: dict[str, Any], inputs: list[str | Path] = (),
              outputs: list[str | Path] = ()) -> Iterator[NullTracker]:
    """Open the child run of one stage (or a top-level run when no pipeline parent is set).

    Manifests of the outputs that no longer describe them (left by a failed run) are removed first.
    On success each output receives a manifest beside it (stage, run id, digest and the run's
    recorded facts) so that the stages reading it can record where their inputs came from.
    """
    cfg = tracking_config()
    if not dist_env().is_main:
        yield NullTracker()  # rank 0 owns the run and the outputs' manifests
        return
    for out in outputs:
        clear_orphan_manifest(out)
    if not cfg.enabled:
        tracker = NullTracker()
        yield tracker
        _write_manifests(stage, "", outputs, tracker.facts)
        return
    tags = {"relin.kind": "stage", "relin.stage": stage, "mlflow.source.git.commit": git_commit(),
            **_process_tags()}
    if parent := os.environ.get(PARENT_ENV, ""):
        tags["mlflow.parentRunId"] = parent
    tracker = Tracker(cfg, stage, tags)
    sampler = None
    if cfg.system_metrics and tracker.run_id:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        sampler = SystemMetricsMonitor(tracker.run_id, sampling_interval=cfg.system_metrics_interval)
        sampler.start()
    status = "FAILED"
    try:
        with _terminate_as_interrupt():
            tracker.log_params(params)
            for path in inputs:
                tracker.log_input(path)
            try:
                yield tracker
            except KeyboardInterrupt:
                status = "KILLED"
                raise
        status = "FINISHED"
    finally:
        if sampler is not None:
            sampler.finish()
        tracker.close(status)
    _write_manifests(stage, tracker.run_id, outputs, tracker.facts)


def _write_manifests(stage: str, run_id: str, outputs, facts: dict[str, Any]) -> None:
    for out in outputs:
        out = Path(out)
        if out.exists():
            atomic_write_json(manifest_path(out), {"stage": stage, "run_id": run_id, "digest": digest(out), **facts})


# ----------------------------------------------------------------------------- pipeline level


def check_store(cfg: TrackingConfig, timeout_s: float = 5.0) -> None:
    """Raise :class:`TrackingUnavailable` (one line) when an HTTP tracking server does not answer, or a SQLite
    store's file is damaged or stays locked for ``timeout_s``."""
    uri = cfg.tracking_uri
    if not cfg.enabled:
        return
    if uri.startswith("sqlite:///"):
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


def replay_outboxes(cfg: TrackingConfig) -> int:
    """Log the writes that earlier stages saved to ``logs/tracking-outbox/``; returns how many files."""
    if not cfg.enabled or not OUTBOX_DIR.is_dir():
        return 0
    client, done = _client(cfg), 0
    for path in sorted(OUTBOX_DIR.glob("*.json")):
        try:
            box = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            print(f"relin: tracking outbox {path}: unreadable, left in place", file=sys.stderr)
            continue
        if box.get("tracking_uri") != cfg.tracking_uri:
            continue
        run_id, ops = box.get("run_id") or None, deque(box["ops"])
        try:
            while ops:
                run_id = _retry(lambda: _apply(client, ops[0], run_id), OPEN_PATIENCE_S)
                ops.popleft()
        except Exception as err:  # noqa: BLE001 - keep what is left for the next invocation
            atomic_write_json(path, {**box, "run_id": run_id or "", "ops": list(ops)})
            print(f"relin: tracking outbox {path}: {len(ops)} write(s) not logged ({_first_line(err)}); kept",
                  file=sys.stderr)
            continue
        path.unlink()
        done += 1
    return done
