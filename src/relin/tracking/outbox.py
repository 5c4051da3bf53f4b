"""Tracking never stops training: every write of a stage's run goes through an outbox.

An :class:`Outbox` holds a run's writes in order and a background thread writes them, so a busy store (a
locked SQLite file, a server that does not answer) is retried in the background of the step loop. What is still
unwritten when the stage ends is saved under ``logs/tracking-outbox/``; :func:`replay_outboxes` logs it when the
next pipeline invocation starts. An entry is a JSON-able dict (``create_run``, ``log_batch``, ``log_input``,
``log_artifact``, ``log_model``, ``terminate``), carried out by :func:`_apply` whether live or replayed. A logged
model is an output of its run, and a model a stage reads an input of the reader's run (found by the id the
producer's manifest holds, or by its content digest), so MLflow draws the lineage model -> run -> model.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from ..config.tracking import TrackingConfig
from ..io import _default_modes, atomic_write_json
from .client import (
    CLOSE_PATIENCE_S,
    OPEN_PATIENCE_S,
    STEP_PATIENCE_S,
    _client,
    _experiment_id,
    _first_line,
    _retry,
    is_transient,
)
from .service import ServiceConnection

OUTBOX_DIR = Path("logs/tracking-outbox")
# How long the background writer waits before it tries a busy store again.
RETRY_EVERY_S = 15.0


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
        _log_input(client, op, run_id)
    elif kind == "log_artifact":
        path = Path(op["path"])
        if path.is_dir():
            client.log_artifacts(run_id, str(path), op.get("artifact_path"))
        elif path.is_file():
            client.log_artifact(run_id, str(path), op.get("artifact_path"))
        else:
            return run_id
        _umask_modes(client, run_id, op.get("artifact_path"))
    elif kind == "log_model":
        _log_model(client, op, run_id)
    elif kind == "terminate":
        client.set_terminated(run_id, status=op["status"])
    else:
        raise ValueError(f"unknown outbox entry {kind!r}")
    return run_id


def _written_once(write) -> None:
    """``write()``; a row it finds already there (a retried write whose first attempt landed, or another stage's
    insert of the same dataset row at the same moment: a second attempt links that row) is no error."""
    try:
        write()
    except Exception as err:  # noqa: BLE001 - only a unique-key conflict is tolerated
        if "UNIQUE constraint failed: datasets" in str(err):
            write()
        elif "UNIQUE constraint failed: inputs" not in str(err):
            raise


def _log_input(client, op: dict[str, Any], run_id: str) -> None:
    """A model another stage logged is a model input of the run (the UI's lineage model -> run -> model); any
    other input is a dataset with its digest and producing run."""
    from mlflow.entities import LoggedModelInput

    if op.get("model") and (model_id := _producer_model(client, op, run_id)):
        _written_once(lambda: client.log_inputs(run_id, models=[LoggedModelInput(model_id)]))
    else:
        _written_once(lambda: client.log_inputs(run_id, datasets=[_dataset_input(op)]))


def _producer_model(client, op: dict[str, Any], run_id: str) -> str | None:
    """The id of the logged model a stage read: the one its manifest names, else (a producer whose writes reached
    the store later, from its outbox) the newest with the input's content digest, the producing run's first."""
    from mlflow.exceptions import MlflowException

    if op.get("model_id"):
        try:
            return client.get_logged_model(op["model_id"]).model_id
        except MlflowException:
            pass  # an id of another store (one moved aside and started anew)
    experiment_id = client.get_run(run_id).info.experiment_id
    found = client.search_logged_models([experiment_id], filter_string=f"tags.`relin.digest` = '{op['digest']}'",
                                        order_by=[{"field_name": "creation_time", "ascending": False}])
    producers = [m for m in found if m.source_run_id == op.get("producer_run_id")]
    return (producers or found)[0].model_id if found else None


def _umask_modes(client, run_id: str, artifact_path: str | None) -> None:
    """The folder an artifact was logged into takes the umask's modes like every output: MLflow's copy keeps the
    source's, and a file some library wrote 0600 would be the one artifact other users cannot read."""
    from mlflow.utils.file_utils import local_file_uri_to_path

    uri = client.get_run(run_id).info.artifact_uri
    if "://" in uri and not uri.startswith("file:"):
        return  # a remote store keeps its own modes
    _default_modes(Path(local_file_uri_to_path(uri), artifact_path or ""))


def _log_model(client, op: dict[str, Any], run_id: str) -> None:
    """A ``LoggedModel`` of run ``run_id``: created once (its id kept in ``op``, so a retried or replayed entry
    makes no second one), an output of the run, its metrics linked, finalised READY."""
    from mlflow.entities import LoggedModelOutput, Metric

    if not op.get("model_id"):
        experiment_id = client.get_run(run_id).info.experiment_id
        op["model_id"] = client.create_logged_model(experiment_id, name=op["name"], source_run_id=run_id,
                                                    tags=op["tags"], params=op["params"],
                                                    model_type=op["model_type"]).model_id
    model_id = op["model_id"]
    _written_once(lambda: client.log_outputs(run_id, [LoggedModelOutput(model_id, op.get("step", 0))]))
    dataset = op.get("dataset") or {}
    metrics = [Metric(k, v, op["timestamp"], op.get("step", 0), model_id=model_id, run_id=run_id,
                      dataset_name=dataset.get("name"), dataset_digest=dataset.get("digest"))
               for k, v in op["metrics"].items()]
    if metrics:
        client.log_batch(run_id, metrics=metrics)
    client.finalize_logged_model(model_id, "READY")


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


class Outbox:
    """The writes of one run, in order, drained by a background thread, so a busy store (MLflow waits up to 20 s
    on a locked SQLite file per statement) never holds up training. ``create_run`` (the first entry) is written
    before the constructor returns, waiting up to ``OPEN_PATIENCE_S``: the run id goes into the outputs' manifests.
    The entries go to the pipeline's tracking service where one answers (:mod:`.service`: this process then never
    imports MLflow), else to the store from this process.
    """

    def __init__(self, cfg: TrackingConfig, name: str, create_run: dict[str, Any]):
        self.cfg, self.name = cfg, name
        self.run_id = ""
        self.model_ids: dict[str, str] = {}  # logged models by their ``relin.path`` tag, for the manifests
        self._service: ServiceConnection | None = None
        self._write = None  # (entry, run id) -> run id: the service's or this process's writer
        self._ops: deque[dict[str, Any]] = deque([create_run])
        self._wake = threading.Condition()
        self._stopping = self._gave_up = False
        self._warned = False
        self._write_head(OPEN_PATIENCE_S)
        self._worker = threading.Thread(target=self._drain, name=f"relin-tracking-{name}", daemon=True)
        self._worker.start()

    def _write_head(self, patience_s: float) -> bool:
        """Write the oldest queued entry; ``False`` when the store is busy (the entry stays queued)."""
        op = self._ops[0]
        try:
            if self._write is None:
                self._write = self._writer()
            run_id = _retry(lambda: self._write(op, self.run_id or None), patience_s)
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
            elif op["op"] == "log_model":
                self.model_ids[op["tags"]["relin.path"]] = op["model_id"]
            if self._warned:
                print("relin: tracking store answers again; queued writes are being logged", file=sys.stderr)
                self._warned = False
        with self._wake:
            self._ops.popleft()
            self._wake.notify_all()
        return True

    def _writer(self):
        self._service = ServiceConnection.connect(self.cfg)
        if self._service is not None:
            return self._service.apply
        client = _client(self.cfg)
        return lambda op, run_id: _apply(client, op, run_id)

    def sample_system_metrics(self, interval_s: float):
        """Sample the machine's CPU, memory, disk, network and GPUs into this run every ``interval_s`` seconds (the
        service samples while this outbox's connection is open); returns the call that stops it."""
        if self._service is not None:
            self._service.monitor(self.run_id, interval_s)
            return lambda: None
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        sampler = SystemMetricsMonitor(self.run_id, sampling_interval=interval_s,
                                       tracking_uri=self.cfg.tracking_uri)
        sampler.start()
        return sampler.finish

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

    def push(self, op: dict[str, Any]) -> None:
        with self._wake:
            self._ops.append(op)
            self._wake.notify_all()

    def close(self) -> None:
        """Wait up to ``CLOSE_PATIENCE_S`` for a busy store to take the queued writes; what it still refuses is
        saved under ``logs/tracking-outbox/`` for the next pipeline invocation."""
        deadline = time.monotonic() + CLOSE_PATIENCE_S
        with self._wake:
            self._stopping = True
            self._wake.notify_all()
            while self._ops and time.monotonic() < deadline:
                self._wake.wait(min(1.0, max(deadline - time.monotonic(), 0.01)))
            self._gave_up = bool(self._ops)
            self._wake.notify_all()
        self._worker.join()  # a write in flight ends within the store's own timeout
        if self._service is not None:
            self._service.close()
        if not self._ops:
            return
        OUTBOX_DIR.mkdir(parents=True, exist_ok=True)
        path = OUTBOX_DIR / f"{self.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
        atomic_write_json(path, {"tracking_uri": self.cfg.tracking_uri, "run_id": self.run_id,
                                 "ops": list(self._ops)})
        print(f"relin: tracking store still busy after {CLOSE_PATIENCE_S:.0f} s; {len(self._ops)} write(s) saved "
              f"to {path}, logged when the next pipeline starts", file=sys.stderr)


def replay_outboxes(cfg: TrackingConfig) -> int:
    """Log the writes that earlier stages saved to ``logs/tracking-outbox/``; returns how many files."""
    if not cfg.enabled or not OUTBOX_DIR.is_dir():
        return 0
    client, done = _client(cfg), 0
    # Oldest first: a producer's logged model is in the store before the stages that read it look it up.
    for path in sorted(OUTBOX_DIR.glob("*.json"), key=lambda p: p.stat().st_mtime):
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
