"""One pipeline run per checkout: the lock that keeps ``dvc repro`` and ``snakemake`` apart; dvc.yaml regenerated
when what it is made from changes, and dvc.lock written in one pass with DVC's reason when it cannot be."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from relin import dvc_sync
from relin.pipeline import (
    PipelineBusy,
    acquire_lock,
    commit_dvc_stages,
    dvc_stages_with_outputs,
    lock_held_elsewhere,
    run_job,
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
    script = ("import time; from relin.pipeline import acquire_lock; held = acquire_lock(%r); "
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
    script = f"from relin.pipeline import acquire_lock; acquire_lock({str(tmp_path)!r}); print('held', flush=True)"
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


def test_dvc_lock_warning_names_dvcs_reason(tmp_path, capsys):
    """Outside git (a downloaded archive) DVC cannot run; the warning says why and what to do, not "no output"."""
    (tmp_path / ".dvc").mkdir()
    shutil.copy(ROOT / ".dvc" / "config", tmp_path / ".dvc" / "config")
    _dvc_yaml(tmp_path, {"a": "a.txt"})
    commit_dvc_stages(["a"], tmp_path)
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a git repository" in err and "git init" in err, err
    assert err.startswith("relin: dvc.lock not updated (") and not (tmp_path / "dvc.lock").exists()


FAKE_GENERATOR = """
import sys
from pathlib import Path

import yaml

from relin import dvc_sync

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
