"""The one MLflow seam: a parent run per pipeline invocation, a child run per stage, lineage inputs.

- :mod:`.client`: this process's tracking config (JSON in ``RELIN_TRACKING_CONFIG``, set by the Snakefile, so
  tracking options never change a stage's command line nor trigger a rerun), the MLflow client and the retries
  of a busy store; a SQLite store's artifact locations relative to the project (``mlruns`` beside the store),
  those of a moved or copied project rewritten when the experiment is opened.
- :mod:`.outbox`: tracking never stops training; every write queues in an outbox written in the background, and
  what a busy store still refuses when a stage ends is saved and replayed by the next pipeline invocation.
- :mod:`.stage_runs`: :func:`stage_run` opens a stage's child run and returns a tracker (params, metrics,
  inputs with their producers, logged models); with tracking disabled or on a non-zero rank a
  :class:`NullTracker` that touches nothing.
- :mod:`.entries`: what each outbox entry does in the store (runs, batches, inputs, logged models).
- :mod:`.service`: the pipeline's process writes every job's run (jobs reach it over a Unix socket and never
  import MLflow); a stage run without one writes its own.
- :mod:`.pipeline_runs`: the store checked, dead invocations' runs closed and the parent run created once,
  before parallel jobs start (:mod:`relin.pipeline.invocation`).
"""
from .client import CONFIG_ENV, artifact_root, relocate_artifacts, tracking_config
from .client import _client as _client  # private names the tests use: _client, _process_tags, _check_sqlite
from .client import _process_tags as _process_tags
from .outbox import OUTBOX_DIR, replay_outboxes
from .pipeline_runs import TrackingUnavailable, check_store, close_dead_runs, end_pipeline, init_pipeline
from .pipeline_runs import _check_sqlite as _check_sqlite
from .service import SERVICE_ENV, start_service
from .stage_runs import PARENT_ENV, NullTracker, stage_run

__all__ = ["CONFIG_ENV", "OUTBOX_DIR", "PARENT_ENV", "SERVICE_ENV", "NullTracker", "TrackingUnavailable",
           "artifact_root", "check_store", "close_dead_runs", "end_pipeline", "init_pipeline", "relocate_artifacts",
           "replay_outboxes", "stage_run", "start_service", "tracking_config"]
