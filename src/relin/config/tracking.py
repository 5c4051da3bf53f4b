"""The ``tracking`` section: MLflow runs and lineage."""
from __future__ import annotations

from dataclasses import dataclass

from .loader import option


@dataclass(kw_only=True)
class TrackingConfig:
    """MLflow tracking: one parent run per pipeline invocation, a child run per stage."""

    enabled: bool = option(True, "log params, metrics, artifacts and lineage to MLflow")
    tracking_uri: str = option("sqlite:///mlflow.db", "MLflow backend store (SQLite at the repo root)")
    experiment: str = option("relin", "MLflow experiment name")
    system_metrics: bool = option(True, "sample CPU/GPU/memory metrics during each stage")
    system_metrics_interval: float = option(10.0, "seconds between system-metric samples", exclusive_minimum=0)
    flush_every: int = option(50, "metric points buffered before one batched write", minimum=1)
