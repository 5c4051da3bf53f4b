"""One pipeline run per checkout: the lock that keeps ``dvc repro`` and ``snakemake`` apart."""
import os
import subprocess
import sys

import pytest

from relin.pipeline import PipelineBusy, acquire_lock, commit_dvc_stages, dvc_stages_with_outputs, run_job


def test_second_holder_is_refused_in_one_line_naming_the_first(tmp_path):
    held = acquire_lock(tmp_path)
    with pytest.raises(PipelineBusy) as err:
        acquire_lock(tmp_path)
    message = str(err.value)
    assert "\n" not in message and f"another pipeline run holds {tmp_path}" in message
    assert f"pid {__import__('os').getpid()}" in message and "nothing was started or changed" in message
    held.close()
    acquire_lock(tmp_path).close()


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
