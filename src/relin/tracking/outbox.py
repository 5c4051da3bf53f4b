"""Tracking never stops training: every write of a stage's run goes through an outbox.

An :class:`Outbox` holds a run's writes in order and a background thread writes them, so a busy store (a
locked SQLite file, a server that does not answer) is retried in the background of the step loop. What is still
unwritten when the stage ends is saved under ``logs/tracking-outbox/``; :func:`replay_outboxes` logs it when the
next pipeline invocation starts. An entry is a JSON-able dict (``create_run``, ``log_batch``, ``log_input``,
``log_artifact``, ``log_model``, ``terminate``), carried out by :func:`.entries.apply` whether live or replayed:
a logged model is an output of its run, and a model a stage reads an input of the reader's run, so MLflow draws
the lineage model -> run -> model.
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
from ..io import atomic_write_json
from .client import (
    CLOSE_PATIENCE_S,
    OPEN_PATIENCE_S,
    STEP_PATIENCE_S,
    _client,
    _first_line,
    _retry,
    is_transient,
    start_system_metrics,
)
from .entries import apply
from .service import ServiceConnection, ServiceGone

OUTBOX_DIR = Path("logs/tracking-outbox")
# How long the background writer waits before it tries a busy store again.
RETRY_EVERY_S = 15.0


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
        return self._via_service if self._service is not None else self._in_process()

    def _in_process(self):
        client = _client(self.cfg)
        return lambda op, run_id: apply(client, op, run_id)

    def _via_service(self, op: dict[str, Any], run_id: str | None) -> str | None:
        """An entry through the service; once it is gone (its pipeline died: this job is being stopped, see
        relin.pipeline.jobserver.lifetime) the rest go to the store from here, so the run still ends KILLED at once."""
        try:
            return self._service.apply(op, run_id)
        except ServiceGone:
            print("relin: the pipeline's tracking service is gone; this stage writes its run itself",
                  file=sys.stderr)
            self._service.close()
            self._service = None
            self._write = self._in_process()
            return self._write(op, run_id)

    def sample_system_metrics(self, interval_s: float):
        """Sample the machine's CPU, memory, disk, network and GPUs into this run every ``interval_s`` seconds (the
        service samples while this outbox's connection is open); returns the call that stops it."""
        if (service := self._service) is not None:
            try:
                service.monitor(self.run_id, interval_s)
            except ServiceGone:
                pass            # the job is stopping: nothing left to sample
            return lambda: None
        return start_system_metrics(self.cfg.tracking_uri, self.run_id, interval_s).finish

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
                run_id = _retry(lambda: apply(client, ops[0], run_id), OPEN_PATIENCE_S)
                ops.popleft()
        except Exception as err:  # noqa: BLE001 - keep what is left for the next invocation
            atomic_write_json(path, {**box, "run_id": run_id or "", "ops": list(ops)})
            print(f"relin: tracking outbox {path}: {len(ops)} write(s) not logged ({_first_line(err)}); kept",
                  file=sys.stderr)
            continue
        path.unlink()
        done += 1
    return done
