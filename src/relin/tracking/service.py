"""One process writes every stage's runs: the tracking service of a pipeline invocation.

Importing MLflow's client and its SQLAlchemy store costs a process about 2.4 s of CPU, paid by every job of the
DAG when each wrote its own run. The ``snakemake`` process imports MLflow once anyway (it creates the parent
run), so it also serves the jobs' writes (as wandb's service process serves its runs): :func:`start_service`
listens on a Unix socket in a private temporary folder and exports ``host:path`` through ``RELIN_TRACKING_SERVICE``;
a job's :class:`~.outbox.Outbox` sends each entry there (:class:`ServiceConnection`) and never imports MLflow.
Where no service answers (a stage run by hand, a job on another host of a cluster) the outbox writes in-process as
before. The service samples system metrics for each run a job asks it to (CPU, memory, disk, network and GPUs are
the machine's, whichever process reads them) and stops when that job's connection closes.

Wire format: one JSON object per line. ``{"op": entry, "run_id": id}`` is answered ``{"run_id": id, "op": entry}``
(the entry as :func:`~.entries.apply` left it: a logged model's id is set there) or ``{"error": "Type: message"}``;
``{"monitor": run_id, "interval": s}`` is answered ``{}``; ``{"store": uri}`` with the service's store (a job
configured for another store writes its own).
"""
from __future__ import annotations

import atexit
import json
import logging
import os
import shutil
import socket
import socketserver
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..config.tracking import TrackingConfig
from ..pipeline.socket_folders import SOCKET, remove_dead
from .client import _client, start_system_metrics
from .entries import apply

SERVICE_ENV = "RELIN_TRACKING_SERVICE"
FOLDER_PREFIX = "relin-tracking-"
# How long a job waits to reach the service before it writes in-process.
CONNECT_TIMEOUT_S = 5.0


class ServiceGone(ConnectionError):
    """The service stopped answering: the pipeline that ran it is gone (a job then writes its run itself)."""


class ServiceError(RuntimeError):
    """A write the service could not carry out; its text is the store's error, so :func:`~.client.is_transient`
    tells a busy store from a refusal as it would in-process."""


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        monitors = []
        try:
            for line in self.rfile:
                request = json.loads(line)
                if "store" in request:
                    reply: dict[str, Any] = {"store": self.server.service.cfg.tracking_uri}
                elif "monitor" in request:
                    monitors.append(self.server.service.monitor(request["monitor"], float(request["interval"])))
                    reply = {}
                else:
                    reply = self.server.service.apply(request["op"], request.get("run_id"))
                self.wfile.write((json.dumps(reply) + "\n").encode())
        except (OSError, ValueError):
            pass  # the job died mid-request: its outbox saves what is left
        finally:
            for monitor in monitors:
                monitor.finish()


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    service: TrackingService


class TrackingService:
    """The writer of every job's runs, on a thread of the process that starts it; one write at a time (a SQLite
    store takes one writer anyway)."""

    def __init__(self, cfg: TrackingConfig):
        self.cfg = cfg
        self._client = _client(cfg)
        # a sampler's start and stop are the job's business, not lines of the pipeline's console
        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)
        self._lock = threading.Lock()
        self._folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        self.path = self._folder / SOCKET
        self._server = _Server(str(self.path), _Handler)
        self._server.service = self
        self._thread = threading.Thread(target=self._server.serve_forever, name="relin-tracking-service",
                                        daemon=True)
        self._closed = False

    @property
    def address(self) -> str:
        """``host:path``: a job on another host, which cannot reach this socket, writes in-process."""
        return f"{socket.gethostname()}:{self.path}"

    def start(self) -> TrackingService:
        self._thread.start()
        atexit.register(self.close)  # an interrupted pipeline leaves no socket folder behind
        return self

    def apply(self, op: dict[str, Any], run_id: str | None) -> dict[str, Any]:
        try:
            with self._lock:
                run_id = apply(self._client, op, run_id)
        except Exception as err:  # noqa: BLE001 - every error goes back to the job's outbox, which decides
            return {"error": f"{type(err).__name__}: {err}"}
        return {"run_id": run_id, "op": op}

    def monitor(self, run_id: str, interval_s: float):
        return start_system_metrics(self.cfg.tracking_uri, run_id, interval_s)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._server.shutdown()
        self._server.server_close()
        shutil.rmtree(self._folder, ignore_errors=True)


def remove_dead_services(min_age_s: float = 60.0) -> list[Path]:
    """Remove the service folders of pipelines killed outright (:func:`relin.pipeline.socket_folders.remove_dead`)."""
    return remove_dead(FOLDER_PREFIX, min_age_s)


def start_service(cfg: TrackingConfig) -> TrackingService:
    """Start the service on a thread of this process and export its address to the processes it starts."""
    remove_dead_services()
    service = TrackingService(cfg).start()
    os.environ[SERVICE_ENV] = service.address
    return service


class ServiceConnection:
    """A job's line to the service; safe to share between the outbox's writer and the stage's thread."""

    def __init__(self, sock: socket.socket):
        self._sock = sock
        self._reader = sock.makefile("rb")
        self._lock = threading.Lock()

    @classmethod
    def connect(cls, cfg: TrackingConfig) -> ServiceConnection | None:
        """The service this process was started under, or ``None`` (none exported, another host's, gone, or
        writing another store than ``cfg``'s)."""
        host, _, path = os.environ.get(SERVICE_ENV, "").partition(":")
        if not path or host != socket.gethostname():
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            print(f"relin: tracking service at {path} does not answer; this stage writes its run itself",
                  file=sys.stderr)
            return None
        sock.settimeout(None)  # a write may wait on a busy store as long as MLflow does
        connection = cls(sock)
        try:
            store = connection._ask({"store": cfg.tracking_uri})["store"]
        except (OSError, ValueError, KeyError):
            store = None
        if store != cfg.tracking_uri:
            connection.close()
            return None
        return connection

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        try:
            with self._lock:
                self._sock.sendall((json.dumps(request) + "\n").encode())
                line = self._reader.readline()
        except OSError as err:
            raise ServiceGone(f"tracking service: {err}") from None
        if not line:
            raise ServiceGone("tracking service closed the connection")
        return json.loads(line)

    def apply(self, op: dict[str, Any], run_id: str | None) -> str | None:
        """:func:`~.entries.apply` of ``op``, carried out by the service: ``op`` is updated as it would be
        in-process; a store error is raised as :class:`ServiceError` with the store's text."""
        reply = self._ask({"op": op, "run_id": run_id})
        if "error" in reply:
            raise ServiceError(reply["error"])
        op.update(reply["op"])
        return reply["run_id"]

    def monitor(self, run_id: str, interval_s: float) -> None:
        """Sample system metrics into ``run_id`` until this connection closes."""
        self._ask({"monitor": run_id, "interval": interval_s})

    def close(self) -> None:
        self._reader.close()
        self._sock.close()
