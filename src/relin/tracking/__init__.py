"""The one MLflow seam (:mod:`.stage_runs`), under the names its callers use."""
from .stage_runs import (  # noqa: F401
    CONFIG_ENV,
    OUTBOX_DIR,
    PARENT_ENV,
    NullTracker,
    TrackingUnavailable,
    _check_sqlite,
    _client,
    _process_tags,
    check_store,
    close_dead_runs,
    end_pipeline,
    init_pipeline,
    replay_outboxes,
    stage_run,
    tracking_config,
)
