"""Recovery that cannot lie (issue #46 item 1), on a three-rule Snakefile with relin's hook (``pipeline.recovery``):
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
import sys

from relin.pipeline import recovery
from relin.pipeline.invocation import Pipeline, command_line_error, lock_held_elsewhere

if mistake := command_line_error(sys.argv[1:], workflow.config_settings.configfiles):
    sys.exit(f"relin: {mistake}")
PIPELINE = Pipeline(commits_dvc=False)
recovery.install(workflow, before=PIPELINE.before_dag, others_running=lock_held_elsewhere)
recovery.keep_replaced_outputs()

onerror:
    recovery.put_back_unsettled()
    PIPELINE.stopped_on_request(workflow)

rule all:
    input: "c.txt"

rule a:
    output: directory("a")
    shell: "mkdir -p a && echo a > a/x"

rule b:
    input: "a"
    output: "b.txt"
    # TOY_SLEEP holds the job after it wrote part of its output, TOY_FAIL fails it at once (environment variables:
    # no rerun trigger)
    shell: "[ -z ${{TOY_FAIL:-}} ] && echo partial > b.txt && sleep ${{TOY_SLEEP:-0}} && cat a/x > b.txt "
           "&& echo b >> b.txt"

rule c:
    input: "b.txt"
    output: "c.txt"
    shell: "cat b.txt > c.txt && echo c >> c.txt"

# Not in `all`: a target whose job writes nothing until it ends, as relin's stages write.
rule d:
    output: "d.txt"
    shell: "[ -z ${{TOY_FAIL:-}} ] && sleep ${{TOY_SLEEP:-0}} && echo d > d.txt"
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
    assert relin_lines(dry) == ["relin: will rebuild 1 missing, unfinished or changed output(s) and what depends on "
                                 "them: a (missing)"], dry.stderr
    assert not (repo / "a").exists(), "a dry run rebuilds nothing"
    proc = run(["snakemake", "--cores", "1"], repo)
    assert relin_lines(proc) == ["relin: rebuilding 1 missing, unfinished or changed output(s) and what depends on "
                                  "them: a (missing)"], proc.stderr
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
        "relin: rebuilding 1 missing, unfinished or changed output(s) and what depends on them: "
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


def _held(repo: Path, *argv: str, sleep: int = 60) -> subprocess.Popen:
    """``snakemake <argv>`` held in job d (it sleeps ``sleep`` s before writing d.txt), in its own process group."""
    proc = subprocess.Popen(["snakemake", "--cores", "1", *argv], cwd=repo, env=workflow_env(TOY_SLEEP=str(sleep)),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while not any((repo / ".snakemake/incomplete").glob("*")):
        assert time.monotonic() < deadline and proc.poll() is None, "job d never started"
        time.sleep(0.05)
    return proc


def test_toy_killed_target_is_named_when_its_job_runs_again(tmp_path):
    """Issue #63: a killed run whose own target was the interrupted job (Snakemake reruns it anyway): the rerun
    still says it rebuilds an unfinished output, as after any kill, on Ctrl-C and kill -9 of the group alike."""
    import os
    import signal

    repo = _toy(tmp_path / "toy")
    for stop in ("ctrl-c", "kill -9"):
        proc = _held(repo, "d.txt")
        if stop == "ctrl-c":
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(timeout=60)
        else:
            kill_tree(proc)
        assert not (repo / "d.txt").exists()
        out = run(["snakemake", "--cores", "1", "d.txt"], repo)
        assert relin_lines(out)[-1] == ("relin: rebuilding 1 missing, unfinished or changed output(s) and what "
                                        "depends on them: d.txt (unfinished: its run was interrupted)"), \
            (stop, out.stderr)
        (repo / "d.txt").unlink()


def test_toy_sigterm_stop_says_what_happened_not_that_a_job_failed(tmp_path):
    """SIGTERM: Snakemake lets the running job finish and stops; it said "At least one job did not complete
    successfully" though none failed."""
    import signal

    repo = _toy(tmp_path / "toy")
    # d first (a and d are both ready; with one core Snakemake's choice between them is arbitrary): it is running when
    # SIGTERM comes, and a, b and c do not start.
    proc = _held(repo, "d.txt", "c.txt", "--forcerun", "a", "--prioritize", "d.txt", sleep=5)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and (repo / "d.txt").read_text() == "d\n", out
    assert "At least one job did not complete successfully" not in out, out
    assert [line for line in out.splitlines() if line.startswith("relin:")] == [
        "relin: stopped on request (SIGTERM) once its running jobs had finished; 3 job(s) did not start: the same "
        "command goes on from there"], out


def test_toy_unlock_beside_a_live_run_is_refused_in_one_line(tmp_path):
    repo = _toy(tmp_path / "toy")
    proc = _held(repo, "d.txt")
    try:
        out = run(["snakemake", "--unlock"], repo, check=False)
        assert out.returncode != 0 and len(relin_lines(out)) == 1, out.stderr
        assert relin_lines(out)[0].startswith("relin: --unlock: a running pipeline holds this checkout (pid ")
        assert relin_lines(out)[0].endswith("its locks end with it: nothing was unlocked")
        assert any((repo / ".snakemake/locks").iterdir()), "the live run's locks are there"
    finally:
        kill_tree(proc)
    assert run(["snakemake", "--unlock"], repo).returncode == 0, "with no run alive, --unlock does its work"


def test_toy_rerun_stopped_by_ctrl_c_keeps_the_previous_output(tmp_path):
    """Ctrl-C of a --forcerun: Snakemake had deleted the job's outputs before it ran; they are back, and still marked
    unfinished, so the next run rebuilds them."""
    import os
    import signal

    repo = _toy(tmp_path / "toy")
    run(["snakemake", "--cores", "1", "d.txt"], repo)
    proc = _held(repo, "d.txt", "--forcerun", "d")
    assert not (repo / "d.txt").exists(), "set aside while its job runs"
    os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert "relin: d was stopped; its previous output is kept: d.txt" in out, out
    assert (repo / "d.txt").read_text() == "d\n"
    again = run(["snakemake", "--cores", "1", "d.txt"], repo)
    assert relin_lines(again)[-1].endswith("d.txt (unfinished: its run was interrupted)"), again.stderr


def test_toy_output_set_aside_by_a_killed_rerun_is_kept_until_a_new_one_exists(tmp_path):
    """kill -9 of a --forcerun (no onerror runs) whose job writes its output only at its end, as relin's stages write:
    the output it had set aside is left as a hidden backup of a dead run. The next run of the job takes it over: a
    failure puts it back in place, a success replaces it, and no backup stays either way."""
    repo = _toy(tmp_path / "toy")
    run(["snakemake", "--cores", "1", "d.txt"], repo)
    kill_tree(_held(repo, "d.txt", "--forcerun", "d"))
    assert not (repo / "d.txt").exists() and list(repo.glob(".d.txt.old-*")), sorted(p.name for p in repo.iterdir())

    failed = run(["snakemake", "--cores", "1", "d.txt"], repo, check=False, TOY_FAIL="1")
    assert failed.returncode != 0
    assert "relin: d failed; its previous output is kept: d.txt" in relin_lines(failed), failed.stderr
    assert (repo / "d.txt").read_text() == "d\n" and not list(repo.glob(".d.txt.old-*")), \
        sorted(p.name for p in repo.iterdir())

    kill_tree(_held(repo, "d.txt", "--forcerun", "d"))
    out = run(["snakemake", "--cores", "1", "d.txt"], repo)
    assert relin_lines(out)[-1].endswith("d.txt (unfinished: its run was interrupted)"), out.stderr
    assert (repo / "d.txt").read_text() == "d\n" and not list(repo.glob(".d.txt.old-*")), \
        sorted(p.name for p in repo.iterdir())


def test_toy_failed_rerun_keeps_the_previous_output_and_its_record(tmp_path):
    """Issue #63 item 3: Snakemake deletes a job's outputs before it runs; a rerun that fails left nothing. Now the
    previous output is back in place, and, its metadata restored, the next plain run has nothing to do."""
    repo = _toy(tmp_path / "toy")
    before = (repo / "b.txt").read_text()
    out = run(["snakemake", "--cores", "1", "--forcerun", "b"], repo, check=False, TOY_FAIL="1")
    assert out.returncode != 0
    assert "relin: b failed; its previous output is kept: b.txt" in relin_lines(out), out.stderr
    assert (repo / "b.txt").read_text() == before and not list(repo.glob(".b.txt.old-*"))
    again = run(["snakemake", "--cores", "1"], repo)
    assert "Nothing to be done" in again.stdout + again.stderr, again.stderr
