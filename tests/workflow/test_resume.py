"""Workflow-level robustness: a killed teacher job resumes from its checkpoint when the workflow is
rerun (bit-identical to an uninterrupted run), and the next invocation closes the killed job's MLflow
run. Recovery that cannot lie (issue #46, ``pipeline.recovery``): after kill -9 of a whole run whose downstream outputs
exist, or with a report input deleted, the plain ``snakemake`` (the command that was killed, without its target)
rebuilds what is missing, says so in one line, and every result equals an uninterrupted run's byte for byte."""
from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from mlflow.tracking import MlflowClient

from relin.io import MANIFEST_SUFFIX, read_manifest

from .conftest import SMOKE, clone_run, kill_tree, overlay, relin_lines, snakemake, workflow_env

pytestmark = pytest.mark.slow

RESUMABLE = {"teacher": {"train": {"steps": 60, "checkpoint_every": 5, "log_every": 5}}}
TEACHER = "results/teacher/qwen3"


@pytest.fixture(scope="module")
def uninterrupted_teacher(smoke_run, tmp_path_factory) -> bytes:
    """The weights of the resumable config's teacher trained from step 0 without a kill, on its own copy of the smoke
    run: what every killed and resumed teacher must equal (training is deterministic on one machine)."""
    repo = clone_run(smoke_run, tmp_path_factory.mktemp("uninterrupted") / "repo")
    snakemake(repo, f"{TEACHER}/train_metrics.json", overlays=(overlay(repo.parent / "resumable.yaml", RESUMABLE),))
    assert read_manifest(repo / TEACHER / "train_metrics.json")["resumed_from"] == 0
    return (repo / TEACHER / "model/model.safetensors").read_bytes()


def _teacher_process(snakemake_pid: int) -> psutil.Process | None:
    for child in psutil.Process(snakemake_pid).children(recursive=True):
        try:
            if "teacher-lm" in child.cmdline() and child.name() not in ("bash", "sh"):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def _tree(pid: int) -> list[psutil.Process]:
    return [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]


def _survivors(processes: list[psutil.Process], timeout: float) -> list[str]:
    """The command lines of ``processes`` still running after ``timeout`` seconds (zombies count as gone)."""
    deadline = time.monotonic() + timeout
    while True:
        alive = []
        for process in processes:
            try:
                if process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(" ".join(process.cmdline())[:120])
            except psutil.NoSuchProcess:
                pass
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.2)


def _runs(repo: Path, stage: str) -> list:
    client = MlflowClient(tracking_uri=f"sqlite:///{repo / 'mlflow.db'}")
    return client.search_runs([client.get_experiment_by_name("relin").experiment_id],
                              f"tags.`relin.stage` = '{stage}'", max_results=100)


@pytest.mark.parametrize("killed", ["the stage", "snakemake alone"])
def test_killed_teacher_resumes_from_its_checkpoint(smoke_run, uninterrupted_teacher, tmp_path, killed):
    """kill -9 of the teacher's stage process (an OOM kill), or of the ``snakemake`` process alone (issue #63: its
    job, the job server and the server's child stopped with it, no orphan training on); the plain rerun resumes
    from the newest checkpoint and gives the bytes of an uninterrupted run."""
    repo = clone_run(smoke_run, tmp_path / "repo")
    target = f"{TEACHER}/train_metrics.json"
    change = overlay(tmp_path / "resumable.yaml", RESUMABLE)
    argv = ["snakemake", target, "--cores", "2", "--configfile", SMOKE, str(change)]
    earlier = set((repo / "checkpoints/teacher/qwen3").glob("*"))
    previous = (repo / target).read_bytes()
    console = tmp_path / "snakemake.out"
    proc = subprocess.Popen(argv, cwd=repo, env=workflow_env(), stdout=console.open("w"), stderr=subprocess.STDOUT)
    deadline, killed_after, tree = time.monotonic() + 600, None, []
    while time.monotonic() < deadline and proc.poll() is None:
        steps = sorted(p for p in (repo / "checkpoints/teacher/qwen3").glob("*/step-*") if p.parent not in earlier)
        teacher = _teacher_process(proc.pid)
        if steps and teacher is not None:
            killed_after = int(steps[-1].name.removeprefix("step-"))
            tree = _tree(proc.pid)
            (teacher if killed == "the stage" else proc).send_signal(signal.SIGKILL)
            break
        time.sleep(0.2)
    proc.wait(timeout=120)
    output = console.read_text()
    assert killed_after is not None, f"no checkpoint appeared before the teacher finished:\n{output}"
    assert proc.returncode != 0, output
    if killed == "the stage":
        # the job failed and Snakemake lived on: the smoke run's output it was to replace is back (pipeline.recovery)
        assert "relin: teacher_lm failed; its previous output is kept: " in output, output
        assert (repo / target).read_bytes() == previous
    else:
        assert not (repo / target).exists(), output
    assert not _survivors(tree, timeout=60), f"processes of the killed run still run: {_survivors(tree, 0)}"
    if killed == "snakemake alone":
        # the job closed its own run as it stopped; the next run closes the pipeline's
        statuses = {r.info.status for r in _runs(repo, "teacher-lm") if r.info.start_time > smoke_start(smoke_run)}
        assert statuses == {"KILLED"}, statuses

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

    teacher_runs = _runs(repo, "teacher-lm")
    assert "RUNNING" not in {r.info.status for r in teacher_runs}
    assert "KILLED" in {r.info.status for r in teacher_runs}, "the killed job's run was closed"

    assert (repo / TEACHER / "model/model.safetensors").read_bytes() == uninterrupted_teacher, \
        "a resumed run must equal an uninterrupted one"


def smoke_start(repo: Path) -> int:
    """When the shared smoke run's last run started (ms): later runs are this test's."""
    return max(r.info.start_time for r in _runs(repo, "report"))


NIAH = "results/lia_mtr/niah/lia_mtr"
# The smoke config trains the bridge NIAH 3 steps; these hold it long enough to be killed after a checkpoint. Only the
# bridge_niah jobs (three bridges) and the report read lia_mtr.niah; 100 steps at ~20 ms leave seconds after the first
# checkpoint for the 0.1 s poll below to kill the run.
SLOW_NIAH = {"lia_mtr": {"niah": {"train": {"steps": 100, "checkpoint_every": 10, "log_every": 10}}}}


def _results(repo: Path) -> dict[str, str]:
    """sha256 of every file under results/ but the run records (run ids, wall times) and the benchmark timings."""
    return {str(path.relative_to(repo)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted((repo / "results").rglob("*"))
            if path.is_file() and not path.name.endswith(MANIFEST_SUFFIX) and path.name != ".snakemake_timestamp"
            and "benchmarks" not in path.relative_to(repo / "results").parts[:1]}


def _differ(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))


def test_killed_run_is_rebuilt_by_the_plain_command_byte_identical(smoke_run, tmp_path):
    """kill -9 of a ``--forcerun`` of a trained model after its first checkpoint: the report built before still
    exists, so Snakemake alone said "Nothing to be done" over the empty model folder (issue #46)."""
    repo = clone_run(smoke_run, tmp_path / "repo")
    slow = overlay(tmp_path / "slow.yaml", SLOW_NIAH)
    snakemake(repo, overlays=(slow,))  # the uninterrupted run of this config
    uninterrupted = _results(repo)

    checkpoints = repo / "checkpoints/lia_mtr/niah/lia_mtr"
    console = tmp_path / "killed.out"
    argv = ["snakemake", "--cores", "2", "--configfile", SMOKE, str(slow), "--forcerun", f"{NIAH}/model"]
    proc = subprocess.Popen(argv, cwd=repo, env=workflow_env(), stdout=console.open("w"), stderr=subprocess.STDOUT)
    deadline, killed_after = time.monotonic() + 600, None
    while time.monotonic() < deadline and proc.poll() is None:
        steps = sorted(checkpoints.glob("*/step-*"))
        if steps:
            kill_tree(proc)
            killed_after = int(steps[-1].name.removeprefix("step-"))
            break
        time.sleep(0.1)
    assert killed_after is not None, f"no checkpoint before the job ended:\n{console.read_text()}"
    assert not (repo / f"{NIAH}/model").exists() and (repo / "results/report").exists()

    recovered = snakemake(repo, overlays=(slow,))  # the README's recovery: the killed command, no target needed
    lines = relin_lines(recovered)
    assert "relin: removed Snakemake's locks left by a run that is no longer running" in lines, lines
    rebuilding = [line for line in lines if line.startswith("relin: rebuilding ")]
    assert len(rebuilding) == 1 and f"{NIAH}/model (unfinished: its run was interrupted)" in rebuilding[0], lines
    record = read_manifest(repo / f"{NIAH}/train_metrics.json")
    assert killed_after <= record["resumed_from"] < SLOW_NIAH["lia_mtr"]["niah"]["train"]["steps"], record
    assert not _differ(uninterrupted, _results(repo)), _differ(uninterrupted, _results(repo))
    again = snakemake(repo, "-n", overlays=(slow,))
    assert "Nothing to be done" in again.stdout + again.stderr and not relin_lines(again), again.stderr


def test_deleted_report_input_is_rebuilt_by_the_plain_command(smoke_run, tmp_path):
    repo = clone_run(smoke_run, tmp_path / "repo")
    before = _results(repo)
    deleted = "results/lia_mtr/probe/probe.json"
    (repo / deleted).unlink()
    out = snakemake(repo)
    assert relin_lines(out)[:1] == ["relin: rebuilding 1 missing, unfinished or changed output(s) and what depends "
                                    f"on them: {deleted} (missing)"], out.stderr
    ran = {line.split()[-1] for line in (out.stdout + out.stderr).splitlines() if line.startswith("localrule ")}
    assert ran == {"bridge_probe:", "report_manifest:", "report:", "all:"}, out.stderr
    assert not _differ(before, _results(repo)), _differ(before, _results(repo))


def test_a_damaged_output_is_rebuilt_by_the_plain_command(smoke_run, tmp_path):
    """Issue #63 item 7: a truncated model file passed a plain run ("Nothing to be done"); its files no longer
    match what its stage recorded, so the plain command rebuilds it and what was made from it."""
    repo = clone_run(smoke_run, tmp_path / "repo")
    weights = repo / "results/teacher/qwen3/model/model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    dry = snakemake(repo, "-n")
    assert relin_lines(dry) == ["relin: will rebuild 1 missing, unfinished or changed output(s) and what depends on "
                                "them: results/teacher/qwen3/model (changed since its job wrote it)"], dry.stderr
    assert "teacher_lm" in dry.stdout
