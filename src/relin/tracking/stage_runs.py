"""A stage's MLflow run: a child of the pipeline's run, its writes queued in an :class:`~.outbox.Outbox`.

:func:`stage_run` opens a stage's child run and returns a :class:`Tracker`: params, per-step metrics
(buffered, written with one batched call), artifacts, system metrics, the git commit, and as inputs
the artifacts the stage read, with their digests and the run ids that produced them. Every model a
stage writes is a logged model and output of its run (:meth:`Tracker.log_model`, MLflow 3's
``LoggedModel``): its type, size and path, the run's final metrics linked to it and to the dataset it
trained on; the weights stay in ``results/`` (DVC holds them), not copied. A stage reading that model
has it as a model input, so the UI draws model -> run -> model. With tracking disabled
(``tracking.enabled: false`` or ``RELIN_TRACKING=0``), or on a non-zero rank, the same calls go to
:class:`NullTracker` and nothing touches MLflow.
"""
from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any, Iterator

from ..config.tracking import TrackingConfig
from ..io import (
    atomic_write_json,
    clear_orphan_manifest,
    digest,
    file_stats,
    manifest_path,
    producing_output,
    read_manifest,
)
from ..pipeline.jobserver.job_lock import job_lock
from ..ranks import dist_env
from .client import _process_tags, git_commit, project_path, tracking_config
from .outbox import Outbox

# The pipeline's run id (set by :mod:`relin.pipeline.invocation` for every job): a stage's run is its child.
PARENT_ENV = "RELIN_PARENT_RUN_ID"


class NullTracker:
    """Tracking switched off: every call is accepted and does nothing (facts still reach manifests)."""

    run_id = ""
    model_ids: dict[str, str] = {}

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
    """A stage's child run. Every write is an entry of its :class:`~.outbox.Outbox`, so a busy store never
    holds up training."""

    def __init__(self, cfg: TrackingConfig, stage: str, tags: dict[str, str], run_name: str = ""):
        super().__init__()
        self.cfg, self.stage = cfg, stage
        self._pending_metrics: list[list] = []
        self._input_digests: dict[str, str] = {}
        self._read_folders: list[dict[str, Any]] = []     # inputs that may be models: a logged model's parents
        self._outbox = Outbox(cfg, stage, {"op": "create_run", "experiment": cfg.experiment,
                                           "run_name": run_name or stage, "tags": tags})

    @property
    def run_id(self) -> str:
        """The run's id; empty when the store refused to create it."""
        return self._outbox.run_id

    @property
    def model_ids(self) -> dict[str, str]:
        """The ids of the logged models the store has taken, by the project path of their folder."""
        return self._outbox.model_ids

    def log_params(self, params: dict[str, Any]) -> None:
        items = [[k, str(v)[:6000]] for k, v in _flatten(params).items()]
        for i in range(0, len(items), 100):
            self._outbox.push({"op": "log_batch", "params": items[i:i + 100]})

    def log_metrics(self, metrics: dict[str, float], step: int | None = None) -> None:
        now = int(time.time() * 1000)
        self._pending_metrics += [[k, float(v), now, step or 0] for k, v in metrics.items()]
        if len(self._pending_metrics) >= self.cfg.flush_every:
            self.flush()

    def flush(self) -> None:
        metrics, self._pending_metrics = self._pending_metrics, []
        for i in range(0, len(metrics), 1000):
            self._outbox.push({"op": "log_batch", "metrics": metrics[i:i + 1000]})

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        self._outbox.push({"op": "log_artifact", "path": project_path(path), "artifact_path": artifact_path})

    def log_input(self, path: str | Path, name: str | None = None) -> None:
        """Record an artifact this stage read: a model another stage logged as a model input, anything else as a
        dataset with its digest and the run that produced it. A path inside another stage's output is recorded as
        that output, so the lineage reaches the run that wrote it."""
        path = producing_output(path)
        producer = read_manifest(path)
        self._input_digests[str(path)] = digest(path)[:36]
        entry = {"op": "log_input", "source": project_path(path), "name": name or str(path),
                 "digest": self._input_digests[str(path)], "producer_run_id": producer.get("run_id", ""),
                 "producer_stage": producer.get("stage", ""), "model": path.is_dir(),
                 "model_id": producer.get("model_id", "")}
        if entry["model"]:
            self._read_folders.append({k: entry[k] for k in ("source", "digest", "producer_run_id", "model_id")})
        self._outbox.push(entry)

    def set_tags(self, tags: dict[str, str]) -> None:
        self._outbox.push({"op": "log_batch", "tags": [[k, str(v)] for k, v in tags.items()]})

    def log_model(self, path: str | Path, name: str, model_type: str, params: dict[str, Any] | None = None,
                  metrics: dict[str, float] | None = None, dataset: str | Path | None = None) -> None:
        """Register the model saved at ``path`` (a directory this stage wrote) as a logged model and output of this
        run: ``name`` and ``model_type`` for the UI's model list, ``params``, ``metrics`` (scalars), and
        ``dataset``, the input it was trained on (its digest, as the run's input records it). Its files are the
        model's artifacts (:func:`~.entries.apply`), the logged models among this run's inputs its parents. Its path
        and content digest are tags: a stage reading it finds it by them when no manifest names its id."""
        op = {"op": "log_model", "name": name, "model_type": model_type, "timestamp": int(time.time() * 1000),
              "files": file_stats(path), "parents": list(self._read_folders),
              "tags": {"relin.path": project_path(path), "relin.digest": digest(path), "relin.stage": self.stage},
              "params": {k: str(v)[:6000] for k, v in _flatten(params or {}).items()},
              "metrics": {k: float(v) for k, v in (metrics or {}).items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool)}}
        if dataset is not None:
            op["dataset"] = {"name": str(dataset),
                             "digest": self._input_digests.get(str(dataset)) or digest(Path(dataset))[:36]}
        self._outbox.push(op)

    def sample_system_metrics(self, interval_s: float):
        """Start sampling the machine's metrics into this run; returns the call that stops it."""
        return self._outbox.sample_system_metrics(interval_s)

    def close(self, status: str) -> None:
        """Flush and end the run (:meth:`~.outbox.Outbox.close`: a busy store's leftovers are saved for the next
        pipeline invocation)."""
        self.flush()
        self._outbox.push({"op": "terminate", "status": status})
        self._outbox.close()


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
              outputs: list[str | Path] = (), label: str = "") -> Iterator[NullTracker]:
    """Open the child run of one stage (or a top-level run when no pipeline parent is set), named
    :func:`run_name` (``label``: what this run of the stage made, where its first output's folder does not say it).

    Manifests of the outputs that no longer describe them (left by a failed run) are removed first.
    On success each output receives a manifest beside it (stage, run id, digest, the id of the logged model
    it is, and the run's recorded facts) so that the stages reading it can record where their inputs came from.
    """
    if not dist_env().is_main:
        yield NullTracker()  # rank 0 owns the run and the outputs' manifests
        return
    # One writer per job: a second process writing these outputs is refused in one line (pipeline.jobserver.job_lock).
    with job_lock(outputs[0]) if outputs else contextlib.nullcontext():
        with _stage_run(stage, params, inputs, outputs, label) as tracker:
            yield tracker


@contextlib.contextmanager
def _stage_run(stage: str, params: dict[str, Any], inputs, outputs, label: str) -> Iterator[NullTracker]:
    cfg = tracking_config()
    for out in outputs:
        clear_orphan_manifest(out)
    if not cfg.enabled:
        tracker = NullTracker()
        yield tracker
        _write_manifests(stage, tracker, outputs)
        return
    tags = {"relin.kind": "stage", "relin.stage": stage, "mlflow.source.git.commit": git_commit(),
            **_process_tags()}
    if parent := os.environ.get(PARENT_ENV, ""):
        tags["mlflow.parentRunId"] = parent
    tracker = Tracker(cfg, stage, tags, f"{stage} · {label}" if label else run_name(stage, outputs))
    stop_sampling = None
    if cfg.system_metrics and tracker.run_id:
        stop_sampling = tracker.sample_system_metrics(cfg.system_metrics_interval)
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
        if stop_sampling is not None:
            stop_sampling()
        tracker.close(status)
    _write_manifests(stage, tracker, outputs)


# Output names that say what a file is, not which model it belongs to.
GENERIC_OUTPUTS = frozenset({"model", "answers", "figures"})


def run_name(stage: str, outputs) -> str:
    """``"<stage> · <what it made>"``: the folder that names the stage's first output (``results/eval/opal-onpolicy/
    metrics.json`` -> ``eval-lm · opal-onpolicy``), so that the runs of one stage read apart in the MLflow UI; none
    where it repeats the stage's name or a word of it (``results/opal/onpolicy/model`` -> ``opal-onpolicy``)."""
    if not outputs:
        return stage
    path = Path(outputs[0])
    folder = path if not path.suffix else path.parent
    while folder.name in GENERIC_OUTPUTS and folder.parent != folder:
        folder = folder.parent
    label = folder.name
    repeats = label.replace("_", "-") in (stage, *stage.split("-"))
    return stage if not label or repeats else f"{stage} · {label}"


def _write_manifests(stage: str, tracker: NullTracker, outputs) -> None:
    for out in outputs:
        out = Path(out)
        if out.exists():
            model = tracker.model_ids.get(project_path(out))
            atomic_write_json(manifest_path(out), {"stage": stage, "run_id": tracker.run_id, "digest": digest(out),
                                                   "files": file_stats(out), **({"model_id": model} if model else {}),
                                                   **tracker.facts})
