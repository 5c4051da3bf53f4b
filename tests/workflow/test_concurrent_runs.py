"""Concurrent runs never take each other's outputs: `dvc repro` during a running `snakemake` stops in one
line while the DAG completes, and a locked MLflow store mid-training delays the metrics without losing one.
Each test runs in its own fresh copy, not the shared smoke run, so xdist can schedule this module on its own."""
from __future__ import annotations

import sqlite3
import subprocess
import time

import pytest

from relin.io import read_manifest

from .conftest import SMOKE, copy_repository, overlay, run, workflow_env

pytestmark = pytest.mark.slow

QWEN3 = "results/teacher/qwen3"


def _wait_for(condition, timeout=600, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_dvc_repro_during_a_running_snakemake_stops_in_one_line_and_loses_nothing(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    slow = overlay(tmp_path / "slow.yaml", {"teacher": {"train": {"steps": 600, "checkpoint_every": 100}}})
    console = tmp_path / "snakemake.out"
    targets = ["results/eval/teacher-qwen3/metrics.json"]
    dag = subprocess.Popen(["snakemake", *targets, "--cores", "2", "--configfile", SMOKE, str(slow)], cwd=repo,
                           env=workflow_env(), stdout=console.open("w"), stderr=subprocess.STDOUT)
    _wait_for(lambda: (repo / "logs/teacher_lm/qwen3.log").is_file(), what="the teachers to start")
    proc = run(["dvc", "repro"], repo, check=False, timeout=600)
    assert dag.poll() is None, "the DAG ended before dvc repro ran: make the teachers slower"
    assert proc.returncode != 0
    ours = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("relin")]
    assert len(ours) == 1 and "another pipeline run holds" in ours[0], proc.stdout + proc.stderr
    assert dag.wait(timeout=900) == 0, console.read_text()
    for out in ("results/data/synth_text", f"{QWEN3}/model", *targets):
        assert (repo / out).exists(), out


def test_locked_tracking_store_mid_training_delays_metrics_but_loses_none(tmp_path):
    from mlflow.tracking import MlflowClient

    repo = copy_repository(tmp_path / "repo")
    long = overlay(tmp_path / "long.yaml", {"teacher": {"train": {"steps": 300, "log_every": 5}}})
    target = f"{QWEN3}/history.csv"
    dag = subprocess.Popen(["snakemake", target, "--cores", "2", "--configfile", SMOKE, str(long)], cwd=repo,
                           env=workflow_env(), stdout=(tmp_path / "out").open("w"), stderr=subprocess.STDOUT)
    _wait_for(lambda: "step " in (repo / "logs/teacher_lm/qwen3.log").read_text()
              if (repo / "logs/teacher_lm/qwen3.log").is_file() else False, what="training to start")
    db = sqlite3.connect(repo / "mlflow.db", timeout=60)
    db.execute("BEGIN EXCLUSIVE")
    time.sleep(30)
    db.rollback()
    db.close()
    assert dag.wait(timeout=900) == 0, (tmp_path / "out").read_text()
    logged_steps = [int(line.split(",")[0]) for line in (repo / target).read_text().splitlines()[1:]]
    assert logged_steps == list(range(5, 301, 5))
    run_id = read_manifest(repo / target)["run_id"]
    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    assert client.get_run(run_id).info.status == "FINISHED"
    assert [m.step for m in client.get_metric_history(run_id, "loss")] == logged_steps
