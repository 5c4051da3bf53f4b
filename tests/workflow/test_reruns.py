"""A rerun after any change gives the new result: a changed data parameter or changed code retrains from
step 0, and a params.yaml that changes the DAG's shape gets a dvc.yaml of that shape (on copies of the shared smoke
run)."""
from __future__ import annotations

import pytest
import yaml

from relin.io import read_manifest

from .conftest import clone_run, overlay, relin_lines, run, snakemake

pytestmark = pytest.mark.slow

QWEN3 = "results/teacher/qwen3"


def test_changed_data_parameter_retrains_from_step_zero(smoke_run, tmp_path):
    repo = clone_run(smoke_run, tmp_path / "repo")
    weights = (repo / QWEN3 / "model/model.safetensors").read_bytes()
    change = overlay(tmp_path / "seed.yaml", {"data": {"seed": 7}})
    snakemake(repo, f"{QWEN3}/train_metrics.json", overlays=(change,))
    assert read_manifest(repo / QWEN3 / "train_metrics.json")["resumed_from"] == 0
    assert (repo / QWEN3 / "model/model.safetensors").read_bytes() != weights, "trained on the new data"
    checkpoints = repo / "checkpoints/teacher/qwen3"  # the job's lock removes the folder it created, once empty
    assert not checkpoints.exists() or not any(checkpoints.iterdir()), "a finished run keeps no checkpoint"


def test_changed_code_reruns_its_stages_through_dvc_from_step_zero(smoke_run, tmp_path):
    repo = clone_run(smoke_run, tmp_path / "repo")
    weights = (repo / QWEN3 / "model/model.safetensors").read_bytes()
    report_config = repo / "src/relin/config/report.py"
    report_config.write_text(report_config.read_text() + "\n# a change in another area's config\n")
    status = run(["dvc", "status"], repo).stdout
    assert "report:" in status and "teacher_lm" not in status and "synth_text" not in status, status
    objectives = repo / "src/relin/train/objectives/ce.py"
    objectives.write_text(objectives.read_text() + "\n# a change to code the teachers run\n")
    out = run(["dvc", "repro", "teacher_lm-qwen3"], repo, timeout=1200).stdout
    assert "Running stage 'teacher_lm-qwen3'" in out and "Running stage 'synth_text'" not in out, out
    assert read_manifest(repo / QWEN3 / "train_metrics.json")["resumed_from"] == 0
    # Deterministic on one machine: the same data and (behaviourally) the same code give the same bytes.
    assert (repo / QWEN3 / "model/model.safetensors").read_bytes() == weights


def test_params_yaml_that_drops_a_bridge_regenerates_dvc_yaml_and_dvc_status_is_clean(smoke_run, tmp_path):
    """Issue #46: params.yaml edited (a bridge dropped from the NIAH, a data parameter of the one left), then a plain
    ``snakemake``: dvc.yaml becomes that params.yaml's DAG, the dropped stage leaves dvc.lock, DVC agrees."""
    repo = clone_run(smoke_run, tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    niah = params["lia_mtr"]["niah"]
    assert "mha" in niah["bridges"] and "bridge_niah-mha" in (repo / "dvc.lock").read_text()
    niah["bridges"] = [bridge for bridge in niah["bridges"] if bridge != "mha"]
    niah["test_examples"] += 1
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    out = run(["snakemake", "--cores", "2"], repo)  # plain: params.yaml holds the smoke config
    count = len(yaml.safe_load((repo / "dvc.yaml").read_text())["stages"])
    assert f"relin: dvc.yaml regenerated for params.yaml's DAG ({count} stages; removed bridge_niah-mha)" in \
        relin_lines(out), relin_lines(out)
    assert not any("dvc.lock not updated" in line for line in relin_lines(out)), out.stderr
    stages = yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    assert "bridge_niah-mha" not in stages and "bridge_niah-lia_mtr" in stages
    assert "bridge_niah-mha" not in yaml.safe_load((repo / "dvc.lock").read_text())["stages"]
    assert "up to date" in run(["dvc", "status"], repo).stdout
