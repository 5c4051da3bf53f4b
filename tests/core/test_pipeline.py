"""One pipeline run per checkout: the lock that keeps ``dvc repro`` and ``snakemake`` apart."""
import subprocess
import sys

import pytest

from relin.pipeline import PipelineBusy, acquire_lock, dvc_stages_with_outputs, run_job


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
