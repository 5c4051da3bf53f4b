"""The DAG runs with tracking switched off, by config or by ``RELIN_TRACKING=0``, and leaves no store."""
from __future__ import annotations

import pytest

from .conftest import copy_repository, overlay, snakemake

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("how", ["RELIN_TRACKING=0", "tracking.enabled: false"])
def test_dag_runs_with_tracking_disabled(tmp_path, how):
    repo = copy_repository(tmp_path)
    if how == "RELIN_TRACKING=0":
        snakemake(repo, "results/data/synth_text", RELIN_TRACKING="0")
    else:
        snakemake(repo, "results/data/synth_text",
                  overlays=(overlay(tmp_path / "off.yaml", {"tracking": {"enabled": False}}),))
    assert (repo / "results/data/synth_text").is_dir()
    assert not (repo / "mlflow.db").exists() and not (repo / "mlruns").exists()
