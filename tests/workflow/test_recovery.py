"""Recovery that cannot lie (issue #46 item 1), on a three-rule Snakefile with relin's hook (``relin.recovery``):
after a killed run, or with an output of a finished run deleted, the plain ``snakemake`` rebuilds every missing or
unfinished output of its DAG and says so in one line. The same on the smoke DAG (a training stage killed after its
first checkpoint, a report input deleted) is in test_resume.py, which shares the smoke run."""
from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import kill_tree, relin_lines, run, workflow_env

pytestmark = pytest.mark.slow

TOY = '''
from relin import recovery
from relin.pipeline import Pipeline, lock_held_elsewhere

PIPELINE = Pipeline(commits_dvc=False)
recovery.install(workflow, before=PIPELINE.before_dag, others_running=lock_held_elsewhere)

rule all:
    input: "c.txt"

rule a:
    output: directory("a")
    shell: "mkdir -p a && echo a > a/x"

rule b:
    input: "a"
    output: "b.txt"
    # TOY_SLEEP holds the job after it wrote part of its output (an environment variable: no rerun trigger)
    shell: "echo partial > b.txt && sleep ${{TOY_SLEEP:-0}} && cat a/x > b.txt && echo b >> b.txt"

rule c:
    input: "b.txt"
    output: "c.txt"
    shell: "cat b.txt > c.txt && echo c >> c.txt"
'''


def _toy(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "Snakefile").write_text(TOY)
    run(["snakemake", "--cores", "1"], path)
    return path


def _rerun_b_held(repo: Path) -> subprocess.Popen:
    """``snakemake --forcerun b``, returned once job b has written part of its output and sleeps."""
    proc = subprocess.Popen(["snakemake", "--cores", "1", "--forcerun", "b"], cwd=repo,
                            env=workflow_env(TOY_SLEEP="60"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not (repo / "b.txt").is_file() or (repo / "b.txt").read_text() != "partial\n":
        assert time.monotonic() < deadline and proc.poll() is None, "job b never started"
        time.sleep(0.05)
    return proc


def test_toy_missing_intermediate_output_is_rebuilt_and_named(tmp_path):
    repo = _toy(tmp_path / "toy")
    before = (repo / "c.txt").read_text()
    shutil.rmtree(repo / "a")
    dry = run(["snakemake", "--cores", "1", "-n"], repo)
    assert relin_lines(dry) == ["relin: will rebuild 1 missing or unfinished output(s) and what depends on them: "
                                 "a (missing)"], dry.stderr
    assert not (repo / "a").exists(), "a dry run rebuilds nothing"
    proc = run(["snakemake", "--cores", "1"], repo)
    assert relin_lines(proc) == ["relin: rebuilding 1 missing or unfinished output(s) and what depends on them: "
                                  "a (missing)"], proc.stderr
    assert (repo / "a/x").read_text() == "a\n" and (repo / "c.txt").read_text() == before
    again = run(["snakemake", "--cores", "1"], repo)
    assert "Nothing to be done" in again.stdout + again.stderr and not relin_lines(again)


def test_toy_killed_run_recovers_with_the_plain_command(tmp_path):
    """kill -9 while a job has written part of its output: Snakemake's locks and an incomplete marker stay behind,
    where Snakemake alone asks for ``--unlock`` and then ``--rerun-incomplete``."""
    repo = _toy(tmp_path / "toy")
    before = (repo / "c.txt").read_text()
    kill_tree(_rerun_b_held(repo))
    assert any((repo / ".snakemake/locks").iterdir()) and any((repo / ".snakemake/incomplete").iterdir())

    out = run(["snakemake", "--cores", "1"], repo)
    assert relin_lines(out) == [
        "relin: removed Snakemake's locks left by a run that is no longer running",
        "relin: rebuilding 1 missing or unfinished output(s) and what depends on them: "
        "b.txt (unfinished: its run was interrupted)"], out.stderr
    assert (repo / "c.txt").read_text() == before
    assert not any((repo / ".snakemake/incomplete").iterdir())


def test_toy_dry_run_leaves_a_live_runs_jobs_alone(tmp_path):
    """While a run holds the checkout, its unfinished jobs are its own: a dry run beside it names none of them."""
    repo = _toy(tmp_path / "toy")
    proc = _rerun_b_held(repo)
    try:
        dry = run(["snakemake", "--cores", "1", "-n"], repo, check=False)
        assert not relin_lines(dry), dry.stderr
        busy = run(["snakemake", "--cores", "1"], repo, check=False)
        assert busy.returncode != 0 and relin_lines(busy)[0].startswith("relin: another pipeline run holds"), \
            busy.stderr
    finally:
        kill_tree(proc)
