"""Workflow-level robustness: a killed teacher job resumes from its checkpoint when the workflow is
rerun (bit-identical to an uninterrupted run), and the next invocation closes the killed job's MLflow
run."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from relin.io import read_manifest

from .conftest import SMOKE, clone_run, overlay, snakemake, workflow_env

pytestmark = pytest.mark.slow

RESUMABLE = {"teacher": {"train": {"steps": 60, "checkpoint_every": 5, "log_every": 5}}}


def _teacher_process(snakemake_pid: int) -> psutil.Process | None:
    for child in psutil.Process(snakemake_pid).children(recursive=True):
        try:
            if "teacher-lm" in child.cmdline() and child.name() not in ("bash", "sh"):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def test_killed_teacher_resumes_from_its_checkpoint(smoke_run, tmp_path):
    repo = clone_run(smoke_run, tmp_path / "repo")
    target = "results/teacher/qwen3/train_metrics.json"
    change = overlay(tmp_path / "resumable.yaml", RESUMABLE)
    argv = ["snakemake", target, "--cores", "2", "--configfile", SMOKE, str(change)]
    earlier = set((repo / "checkpoints/teacher/qwen3").glob("*"))
    console = tmp_path / "snakemake.out"
    proc = subprocess.Popen(argv, cwd=repo, env=workflow_env(), stdout=console.open("w"), stderr=subprocess.STDOUT)
    deadline, killed_after = time.monotonic() + 600, None
    while time.monotonic() < deadline and proc.poll() is None:
        steps = sorted(p for p in (repo / "checkpoints/teacher/qwen3").glob("*/step-*") if p.parent not in earlier)
        teacher = _teacher_process(proc.pid)
        if steps and teacher is not None:
            killed_after = int(steps[-1].name.removeprefix("step-"))
            teacher.send_signal(signal.SIGKILL)
            break
        time.sleep(0.2)
    proc.wait(timeout=120)
    output = console.read_text()
    assert killed_after is not None, f"no checkpoint appeared before the teacher finished:\n{output}"
    assert proc.returncode != 0 and not (repo / target).exists(), output

    snakemake(repo, target, overlays=(change,))
    metrics, record = json.loads((repo / target).read_text()), read_manifest(repo / target)
    assert 0 < killed_after <= record["resumed_from"] <= RESUMABLE["teacher"]["train"]["steps"], record
    assert metrics["steps"] == RESUMABLE["teacher"]["train"]["steps"]
    log = (repo / "logs/teacher_lm/qwen3.log").read_text()
    assert f"resuming from step {record['resumed_from']} (" in log
    # In a log file the progress bar is off; the logged steps continue from the resumed one.
    logged = [int(m) for m in re.findall(r"^step (\d+)/", log.split("resuming from step", 1)[1], re.M)]
    every = RESUMABLE["teacher"]["train"]["log_every"]
    assert logged and logged[0] == record["resumed_from"] + every, (record["resumed_from"], logged)

    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    teacher_runs = client.search_runs([client.get_experiment_by_name("relin").experiment_id],
                                      "tags.`relin.stage` = 'teacher-lm'", max_results=100)
    assert "RUNNING" not in {r.info.status for r in teacher_runs}
    assert "KILLED" in {r.info.status for r in teacher_runs}, "the killed job's run was closed by the rerun"

    resumed = (repo / "results/teacher/qwen3/model/model.safetensors").read_bytes()
    snakemake(repo, target, "--forcerun", "teacher_lm", overlays=(change,))
    assert read_manifest(repo / target)["resumed_from"] == 0
    assert (repo / "results/teacher/qwen3/model/model.safetensors").read_bytes() == resumed, \
        "a resumed run must equal an uninterrupted one"
