"""Fixtures of the tracking tests: a SQLite store in the test's folder, and the pipeline's tracking service."""
import json

import pytest

from relin import tracking
from relin.config.tracking import TrackingConfig


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", system_metrics=False, flush_every=5)
    monkeypatch.setenv(tracking.CONFIG_ENV, json.dumps({"tracking_uri": cfg.tracking_uri, "system_metrics": False,
                                                        "flush_every": 5}))
    monkeypatch.delenv(tracking.PARENT_ENV, raising=False)
    monkeypatch.delenv(tracking.SERVICE_ENV, raising=False)
    monkeypatch.delenv("RELIN_TRACKING", raising=False)
    tracking.init_pipeline(cfg)  # creates the store before anything locks it
    return cfg


@pytest.fixture
def service(store, monkeypatch):
    """The pipeline's tracking service for this test, exported to the processes it starts."""
    monkeypatch.setenv(tracking.SERVICE_ENV, "")  # the test's end restores the environment as it was
    running = tracking.start_service(store)
    yield running
    running.close()
