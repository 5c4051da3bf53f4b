"""One pipeline run per checkout: the lock that keeps ``dvc repro`` and ``snakemake`` apart; dvc.yaml regenerated
when what it is made from changes, and dvc.lock written in one pass with DVC's reason when it cannot be."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from relin.pipeline import dvc_sync
from relin.pipeline.invocation import (
    DvcYamlChanged,
    PipelineBusy,
    acquire_lock,
    command_line_error,
    commit_dvc_stages,
    dvc_stages_with_outputs,
    lock_held_elsewhere,
    run_job,
    stage_error,
)

ROOT = Path(__file__).resolve().parents[2]


def test_second_holder_is_refused_in_one_line_naming_the_first(tmp_path):
    held = acquire_lock(tmp_path)
    with pytest.raises(PipelineBusy) as err:
        acquire_lock(tmp_path)
    message = str(err.value)
    assert "\n" not in message and f"another pipeline run holds {tmp_path}" in message
    assert f"pid {__import__('os').getpid()}" in message and "nothing was started or changed" in message
    held.close()
    acquire_lock(tmp_path).close()


def test_a_held_lock_is_seen_from_another_process_and_probing_creates_nothing(tmp_path):
    assert not lock_held_elsewhere(tmp_path) and not (tmp_path / ".snakemake").exists()
    script = ("import time; from relin.pipeline.invocation import acquire_lock; held = acquire_lock(%r); "
              "print('held', flush=True); time.sleep(60)" % str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert lock_held_elsewhere(tmp_path)
    finally:
        holder.kill()
        holder.wait()
    assert not lock_held_elsewhere(tmp_path)


def test_lock_dies_with_its_holder(tmp_path):
    script = (f"from relin.pipeline.invocation import acquire_lock; acquire_lock({str(tmp_path)!r}); "
              "print('held', flush=True)")
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True)
    acquire_lock(tmp_path).close()


def test_run_job_refuses_while_a_pipeline_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    held = acquire_lock(tmp_path)
    with pytest.raises(PipelineBusy):
        run_job("synth_text", ["results/data/synth_text"])
    held.close()


def test_dvc_stages_with_outputs_lists_only_finished_stages(tmp_path):
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  a:\n    cmd: x\n    outs:\n    - out/a:\n        persist: true\n"
        "  b:\n    cmd: y\n    outs:\n    - out/b\n    metrics:\n    - out/b.json:\n        persist: true\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out/a").write_text("a")
    (tmp_path / "out/b").write_text("b")
    assert dvc_stages_with_outputs(tmp_path) == ["a"]
    (tmp_path / "out/b.json").write_text("{}")
    assert dvc_stages_with_outputs(tmp_path) == ["a", "b"]


def test_only_the_stages_of_the_finished_dag_are_committed(tmp_path):
    """A stage outside the run's DAG keeps its dvc.lock entry (its outputs may predate a changed
    parameter); once the DAG holds every stage, all are recorded."""
    import yaml

    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=tmp_path, env=env, check=True)
    (tmp_path / "params.yaml").write_text("x: 1\ny: 2\n")
    (tmp_path / "dvc.yaml").write_text(
        "stages:\n  a:\n    cmd: x\n    params: [x]\n    outs:\n    - a.txt:\n        persist: true\n"
        "  b:\n    cmd: y\n    params: [y]\n    outs:\n    - b.txt:\n        persist: true\n")
    (tmp_path / "a.txt").write_text("a")
    (tmp_path / "b.txt").write_text("b")
    commit_dvc_stages(["a"], tmp_path)
    assert set(yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]) == {"a"}
    commit_dvc_stages(["a", "b", "not-a-dvc-stage"], tmp_path)
    assert set(yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]) == {"a", "b"}


def _dvc_repo(root, stages: dict[str, str]) -> None:
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, env=env, check=True)
    _dvc_yaml(root, stages)


def _dvc_yaml(root, stages: dict[str, str]) -> None:
    (root / "dvc.yaml").write_text("stages:\n" + "".join(
        f"  {name}:\n    cmd: {name}\n    outs:\n    - {out}:\n        persist: true\n"
        for name, out in stages.items()))
    for out in stages.values():
        (root / out).write_text(out)


def test_entries_of_stages_dvc_yaml_no_longer_defines_leave_dvc_lock(tmp_path):
    """A params.yaml with fewer bridges regenerates dvc.yaml with fewer stages: their old entries go in the same
    write that records the run's stages, so dvc.lock describes only stages that exist."""
    _dvc_repo(tmp_path, {"a": "a.txt", "b": "b.txt"})
    commit_dvc_stages(["a", "b"], tmp_path)
    assert set(yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]) == {"a", "b"}
    _dvc_yaml(tmp_path, {"a": "a.txt"})
    commit_dvc_stages(["a"], tmp_path)
    assert set(yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]) == {"a"}
    status = subprocess.run(["dvc", "status"], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "up to date" in status.stdout


def test_dvc_runs_outside_git_and_its_lock_is_ignored_by_git(tmp_path):
    """The project's DVC runs without git (core.no_scm): dvc.lock, the record of this checkout's runs, is git-ignored
    (DVC refuses an ignored dvc.lock in git mode), so a run leaves `git status` clean, and a downloaded archive (no
    .git) records its runs too."""
    (tmp_path / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", tmp_path / ".dvc" / "config")
    _dvc_yaml(tmp_path, {"a": "a.txt"})
    commit_dvc_stages(["a"], tmp_path)
    assert set(yaml.safe_load((tmp_path / "dvc.lock").read_text())["stages"]) == {"a"}
    ignored = subprocess.run(["git", "check-ignore", "-q", "dvc.lock"], cwd=ROOT)
    assert ignored.returncode == 0, "dvc.lock is not git-ignored"


def test_dvc_lock_warning_names_dvcs_reason(tmp_path, capsys):
    """DVC cannot write the lock (here: the one there is not YAML): the warning gives DVC's reason, not "no
    output", and the stages stay unrecorded."""
    (tmp_path / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", tmp_path / ".dvc" / "config")
    _dvc_yaml(tmp_path, {"a": "a.txt"})
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages: [unclosed\n")
    commit_dvc_stages(["a"], tmp_path)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("relin: dvc.lock not updated (") and "dvc.lock" in err, err
    assert "1 stage(s) this run finished as changed" in err


FAKE_GENERATOR = """
import sys
from pathlib import Path

import yaml

from relin.pipeline import dvc_sync

root = Path(__file__).resolve().parents[2]
with (root / "runs").open("a") as runs:
    runs.write("run\\n")
digest = dvc_sync.inputs_digest(root)
names = yaml.safe_load((root / "params.yaml").read_text())["stages"]
if "boom" in names:
    sys.exit("gen_dvc: a rule calls `relin boom`, which is no relin stage")
(root / "dvc.yaml").write_text("stages:\\n" + "".join(f"  {name}:\\n    cmd: {name}\\n" for name in names))
dvc_sync.record(root, digest)
"""


def test_dvc_yaml_is_regenerated_only_when_what_it_is_made_from_changes(tmp_path):
    (tmp_path / ".dvc").mkdir()
    (tmp_path / "workflow/scripts").mkdir(parents=True)
    (tmp_path / dvc_sync.GENERATOR).write_text(FAKE_GENERATOR)
    (tmp_path / "params.yaml").write_text("stages: [a, b]\n")
    assert dvc_sync.sync(tmp_path) == "dvc.yaml regenerated for params.yaml's DAG (2 stages; added a, b)"
    assert dvc_sync.sync(tmp_path) is None and (tmp_path / "runs").read_text().count("run") == 1, "current: not run"
    (tmp_path / "params.yaml").write_text("stages: [a, b]  # the same DAG\n")
    assert dvc_sync.sync(tmp_path) is None and (tmp_path / "runs").read_text().count("run") == 2
    (tmp_path / "params.yaml").write_text("stages: [a]\n")
    assert dvc_sync.sync(tmp_path) == "dvc.yaml regenerated for params.yaml's DAG (1 stage; removed b)"
    (tmp_path / "dvc.yaml").write_text("stages:\n  edited:\n    cmd: x\n")
    assert dvc_sync.sync(tmp_path) == "dvc.yaml regenerated for params.yaml's DAG (1 stage; added a; removed edited)"
    (tmp_path / "params.yaml").write_text("stages: [a, boom]\n")
    with pytest.raises(dvc_sync.DvcYamlStale) as err:
        dvc_sync.sync(tmp_path)
    assert str(err.value).startswith("dvc.yaml: could not be regenerated for params.yaml's DAG (gen_dvc: a rule calls")
    assert "\n" not in str(err.value)


def test_run_job_makes_dvc_yaml_current_and_runs_nothing_when_it_was_stale(tmp_path, monkeypatch):
    """Issue #63 item 5: DVC reads dvc.yaml as it is; a params.yaml that drops a stage reaches the stage's command,
    which regenerates dvc.yaml and refuses in one line: `dvc repro -s` of the dropped stage trains nothing."""
    (tmp_path / ".dvc").mkdir()
    (tmp_path / "workflow/scripts").mkdir(parents=True)
    (tmp_path / dvc_sync.GENERATOR).write_text(FAKE_GENERATOR)
    (tmp_path / "params.yaml").write_text("stages: [a, b]\n")
    dvc_sync.sync(tmp_path)
    (tmp_path / "params.yaml").write_text("stages: [a]\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(subprocess, "run", _no_snakemake(subprocess.run))
    with pytest.raises(DvcYamlChanged) as err:
        run_job("b", ["b.txt"])
    assert str(err.value) == ("dvc.yaml regenerated for params.yaml's DAG (1 stage; removed b), after `dvc repro` "
                              "had read the old one: nothing was run; run `dvc repro` (or `dvc status`) again on the "
                              "new one")
    assert dvc_sync.stage_names(tmp_path) == ["a"]


def _no_snakemake(run):
    def guarded(cmd, *args, **kwargs):
        assert cmd[0] != "snakemake", "the stage's job ran"
        return run(cmd, *args, **kwargs)

    return guarded


def test_a_command_line_with_a_target_after_configfile_is_one_line_saying_where_targets_go():
    argv = ["--cores", "2", "--configfile", "workflow/configs/smoke.yaml", "results/eval/teacher-qwen3/metrics.json"]
    message = command_line_error(argv, ["workflow/configs/smoke.yaml", "results/eval/teacher-qwen3/metrics.json"])
    assert message == ("--configfile results/eval/teacher-qwen3/metrics.json: a target (a DAG output), not a config "
                       "overlay: Snakemake reads every word after --configfile as one; put targets before the options: "
                       "snakemake results/eval/teacher-qwen3/metrics.json --cores 2 --configfile "
                       "workflow/configs/smoke.yaml")
    assert command_line_error(["--configfile", "a.yaml", "--configfile", "b.yaml"], ["b.yaml"]).startswith(
        "--configfile: given more than once")
    assert command_line_error(["results/x", "--configfile", "a.yaml"], ["a.yaml"]) is None


@pytest.mark.parametrize("log, line", [
    ("step 1/5\nrelin real-text: error: lm_eval 0.4.13 is installed (expected 0.4.12)\n",
     "relin real-text: error: lm_eval 0.4.13 is installed (expected 0.4.12)"),
    ("Traceback (most recent call last):\n  File x\nValueError: a bad shape\n\n",
     "relin: teacher_lm failed: ValueError: a bad shape"),
    ("step 1/5\nstep 2/5\n", None),                  # killed by a signal: nothing of its own to say
], ids=["stage-error", "traceback", "killed"])
def test_a_failed_jobs_own_error_is_read_from_its_log(tmp_path, log, line):
    (tmp_path / "job.log").write_text(log)
    assert stage_error([str(tmp_path / "missing.log"), str(tmp_path / "job.log")], "teacher_lm") == line
