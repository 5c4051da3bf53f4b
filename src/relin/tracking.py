"""The one MLflow seam: a parent run per pipeline invocation, a child run per stage, lineage inputs.

- :func:`init_pipeline` creates the SQLite store, the experiment and the parent run once, before
  parallel jobs start (concurrent first-time creation corrupts the store); the Snakefile calls it
  from ``onstart`` and exports the parent run id to every job through ``RELIN_PARENT_RUN_ID``.
- :func:`stage_run` opens a stage's child run and returns a :class:`Tracker`: params, per-step
  metrics (buffered, written with one batched call), artifacts, system metrics, the git commit, and
  as inputs the artifacts the stage read, with their digests and the run ids that produced them.
- With tracking disabled (``tracking.enabled: false`` or ``RELIN_TRACKING=0``), or on a non-zero
  rank, the same calls go to :class:`NullTracker` and nothing touches MLflow.

The tracking config travels to jobs as JSON in ``RELIN_TRACKING_CONFIG`` (set by the Snakefile), so
tracking options never change a stage's command line and never trigger a rerun.
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator

from .config import TrackingConfig
from .configlib import build
from .io import atomic_write_json, digest, manifest_path, read_manifest

PARENT_ENV = "RELIN_PARENT_RUN_ID"
CONFIG_ENV = "RELIN_TRACKING_CONFIG"


def _quiet_mlflow_env() -> None:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("DO_NOT_TRACK", "true")
    os.environ.setdefault("GIT_PYTHON_REFRESH", "quiet")


def tracking_config() -> TrackingConfig:
    """The tracking config of this process: from ``RELIN_TRACKING_CONFIG`` or the defaults."""
    raw = json.loads(os.environ.get(CONFIG_ENV, "{}") or "{}")
    cfg = build(TrackingConfig, raw, "tracking")
    if os.environ.get("RELIN_TRACKING", "1") == "0":
        cfg.enabled = False
    return cfg


def _rank() -> int:
    return int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def init_pipeline(cfg: TrackingConfig, run_name: str = "pipeline", tags: dict[str, str] | None = None) -> str:
    """Create store, experiment and parent run (once, single process). Returns the parent run id."""
    if not cfg.enabled:
        return ""
    _quiet_mlflow_env()
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=cfg.tracking_uri)
    exp = client.get_experiment_by_name(cfg.experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(cfg.experiment)
    run = client.create_run(exp_id, run_name=run_name, tags={
        "relin.kind": "pipeline", "mlflow.source.git.commit": git_commit(), **(tags or {})})
    return run.info.run_id


def end_pipeline(cfg: TrackingConfig, run_id: str, status: str = "FINISHED") -> None:
    if cfg.enabled and run_id:
        from mlflow.tracking import MlflowClient

        MlflowClient(tracking_uri=cfg.tracking_uri).set_terminated(run_id, status=status)


class NullTracker:
    """Tracking switched off: every call is accepted and does nothing."""

    run_id = ""

    def log_params(self, params: dict[str, Any]) -> None: ...
    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None: ...
    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None: ...
    def log_input(self, path: str | Path, name: str | None = None) -> None: ...
    def set_tags(self, tags: dict[str, str]) -> None: ...
    def flush(self) -> None: ...


class Tracker(NullTracker):
    """A stage's child run. Metrics are buffered and written with ``log_batch``."""

    def __init__(self, client, run_id: str, flush_every: int):
        self.client, self.run_id, self.flush_every = client, run_id, flush_every
        self._pending: list = []

    def log_params(self, params: dict[str, Any]) -> None:
        from mlflow.entities import Param

        flat = _flatten(params)
        items = [Param(k, str(v)[:6000]) for k, v in flat.items()]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i:i + 100])

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        self._pending += [Metric(k, float(v), now, step or 0) for k, v in metrics.items()]
        if len(self._pending) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        while self._pending:
            batch, self._pending = self._pending[:1000], self._pending[1000:]
            self.client.log_batch(self.run_id, metrics=batch)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        elif path.is_file():
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_input(self, path: str | Path, name: str | None = None) -> None:
        """Record an artifact this stage read: its digest and the run that produced it."""
        import warnings

        from mlflow.data.dataset_source_registry import resolve_dataset_source
        from mlflow.data.meta_dataset import MetaDataset
        from mlflow.entities import DatasetInput, InputTag
        from mlflow.exceptions import MlflowException

        path = Path(path)
        producer = read_manifest(path)
        with warnings.catch_warnings():  # "source can be interpreted in multiple ways": harmless
            warnings.simplefilter("ignore")
            source = resolve_dataset_source(str(path.resolve()))
        dataset = MetaDataset(source=source, name=name or str(path), digest=digest(path)[:36])
        tags = [InputTag("mlflow.data.context", "input")]
        if producer.get("run_id"):
            tags.append(InputTag("relin.producer_run_id", producer["run_id"]))
            tags.append(InputTag("relin.producer_stage", producer.get("stage", "")))
        entry = DatasetInput(dataset._to_mlflow_entity(), tags)
        try:
            self.client.log_inputs(self.run_id, datasets=[entry])
        except MlflowException:
            # Parallel stages reading the same artifact race on the store's dataset row (looked up,
            # then inserted); the retry finds the row the other job created.
            time.sleep(0.5)
            self.client.log_inputs(self.run_id, datasets=[entry])

    def set_tags(self, tags: dict[str, str]) -> None:
        for k, v in tags.items():
            self.client.set_tag(self.run_id, k, str(v))


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
def stage_run(stage: str, params: dict[str, Any], inputs: list[str | Path] = (),
              outputs: list[str | Path] = ()) -> Iterator[NullTracker]:
    """Open the child run of one stage (or a top-level run when no pipeline parent is set).

    On success each output directory receives a manifest (stage, run id, digest) so that the stages
    reading it can record where their inputs came from.
    """
    cfg = tracking_config()
    if _rank() != 0:
        yield NullTracker()  # rank 0 owns the run and the outputs' manifests
        return
    if not cfg.enabled:
        yield NullTracker()
        _write_manifests(stage, "", outputs)
        return
    _quiet_mlflow_env()
    import mlflow
    from mlflow.tracking import MlflowClient

    mlflow.set_tracking_uri(cfg.tracking_uri)
    client = MlflowClient(tracking_uri=cfg.tracking_uri)
    exp = client.get_experiment_by_name(cfg.experiment)
    exp_id = exp.experiment_id if exp else client.create_experiment(cfg.experiment)
    tags = {"relin.kind": "stage", "relin.stage": stage, "mlflow.source.git.commit": git_commit()}
    parent = os.environ.get(PARENT_ENV, "")
    if parent:
        tags["mlflow.parentRunId"] = parent
    run = client.create_run(exp_id, run_name=stage, tags=tags)
    tracker = Tracker(client, run.info.run_id, cfg.flush_every)
    sampler = None
    if cfg.system_metrics:
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        sampler = SystemMetricsMonitor(run.info.run_id, sampling_interval=cfg.system_metrics_interval)
        sampler.start()
    status = "FAILED"
    try:
        tracker.log_params(params)
        for path in inputs:
            tracker.log_input(path)
        yield tracker
        tracker.flush()
        status = "FINISHED"
    finally:
        if sampler is not None:
            sampler.finish()
        tracker.flush()
        client.set_terminated(run.info.run_id, status=status)
    _write_manifests(stage, run.info.run_id, outputs)


def _write_manifests(stage: str, run_id: str, outputs) -> None:
    for out in outputs:
        out = Path(out)
        if out.exists():
            atomic_write_json(manifest_path(out), {"stage": stage, "run_id": run_id, "digest": digest(out)})
