"""The ``tracking`` section: MLflow runs and lineage."""
from __future__ import annotations

from dataclasses import dataclass

from .loader import option

# The project's own store, created beside params.yaml by the first run.
DEFAULT_STORE = "sqlite:///mlflow.db"


@dataclass(kw_only=True)
class TrackingConfig:
    """MLflow tracking: one parent run per pipeline invocation, a child run per stage."""

    enabled: bool = option(True, "log params, metrics, artifacts and lineage to MLflow")
    tracking_uri: str = option(DEFAULT_STORE, "MLflow backend store (SQLite at the repo root)")
    create_store: bool = option(False, "start a new store when tracking_uri names a SQLite file that does not exist "
                                       "(the default sqlite:///mlflow.db is created on first use either way)")
    experiment: str = option("relin", "MLflow experiment name")
    system_metrics: bool = option(True, "sample CPU/GPU/memory metrics during each stage")
    system_metrics_interval: float = option(10.0, "seconds between system-metric samples", exclusive_minimum=0)
    flush_every: int = option(50, "metric points buffered before one batched write", minimum=1)
