"""What a user sees when something goes wrong (issue #63, on copies of the shared smoke run): a failing stage's own
error line heads a short Snakemake block and the output it was to replace is kept; a target written after
--configfile is one line saying where targets go; `dvc repro` of a stage params.yaml no longer has runs nothing."""
from __future__ import annotations

import hashlib

import pytest
import yaml

from relin.io import manifest_path

from .conftest import SMOKE, clone_run, overlay, relin_lines, run, snakemake

pytestmark = pytest.mark.slow

REAL_TEXT = "results/data/real_text"


def _files(path) -> dict[str, str]:
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file() and f.name != ".snakemake_timestamp"}


def test_a_failing_stage_says_why_on_the_console_and_keeps_the_output_it_was_to_replace(smoke_run, tmp_path):
    repo = clone_run(smoke_run, tmp_path / "repo")
    before, record = _files(repo / REAL_TEXT), manifest_path(repo / REAL_TEXT).read_text()
    wrong = overlay(tmp_path / "version.yaml", {"real_text": {"version": "0.4.12"}})
    out = snakemake(repo, REAL_TEXT, overlays=(wrong,), check=False)
    console = (out.stdout + out.stderr).splitlines()
    assert out.returncode != 0
    error = next(i for i, line in enumerate(console) if line.startswith("relin real-text: error: "))
    assert console[error].startswith("relin real-text: error: real_text: lm_eval 0.4.13 is installed, expected "
                                     "0.4.12"), console[error]
    assert console[error + 1].startswith("[") and console[error + 2] == "Error in rule real_text:", console
    block = console[error + 2:]
    assert not any(line.strip() == "shell:" for line in block) and len(block) <= 14, "\n".join(block)
    assert f"relin: real_text failed; its previous output is kept: {REAL_TEXT}" in relin_lines(out)
    assert _files(repo / REAL_TEXT) == before and manifest_path(repo / REAL_TEXT).read_text() == record
    # still to be rebuilt with the changed parameter; as it was without it
    assert "real_text" in snakemake(repo, "-n", REAL_TEXT, overlays=(wrong,)).stdout
    assert "Nothing to be done" in snakemake(repo, "-n", REAL_TEXT).stdout


def test_a_target_after_configfile_is_one_line_saying_where_targets_go(smoke_run, tmp_path):
    target = "results/eval/teacher-qwen3/metrics.json"
    out = run(["snakemake", "--cores", "2", "--configfile", SMOKE, target], smoke_run, check=False)
    assert out.returncode != 0
    assert relin_lines(out) == [f"relin: --configfile {target}: a target (a DAG output), not a config overlay: "
                                f"Snakemake reads every word after --configfile as one; put targets before the "
                                f"options: snakemake {target} --cores 2 --configfile {SMOKE}"], out.stderr


@pytest.mark.parametrize("argv, expected", [
    (["--configfile", "workflow/configs/smok.yaml"],
     "relin: --configfile workflow/configs/smok.yaml: no such file (expected a YAML overlay, e.g. "
     "workflow/configs/smoke.yaml)"),
    (["--configfile", SMOKE, "results/eval/missing/metrics.json"],
     "relin: --configfile results/eval/missing/metrics.json: no such file, and a target, not a config overlay "
     "(--configfile takes every word after it); put targets before the options: snakemake "
     "results/eval/missing/metrics.json --cores 2 --configfile FILE"),
    (["--config", "teacher={train: {steps: 5}}", "results/eval/teacher-qwen3/metrics.json"],
     "relin: --config results/eval/teacher-qwen3/metrics.json: not a KEY=VALUE pair (--config takes every word after "
     "it); put targets before the options (snakemake results/eval/teacher-qwen3/metrics.json --cores 2 --config "
     "KEY=VALUE), and nest keys as YAML: --config 'teacher={train: {steps: 5}}'"),
    (["--configfile", SMOKE, "results/report"],
     "relin: --configfile results/report: a directory, and a target, not a config overlay (--configfile takes every "
     "word after it); put targets before the options: snakemake results/report --cores 2 --configfile FILE"),
], ids=["mistyped overlay", "target after --configfile", "target after --config", "a folder target"])
def test_a_command_line_snakemake_cannot_read_is_one_line(smoke_run, argv, expected):
    """Snakemake reads these before the Snakefile and printed a traceback of its own (26 and 28 lines); relin's
    logger plugin, which the project's workflow profile names, says what is wrong in one line."""
    out = run(["snakemake", "-n", "--cores", "2", *argv], smoke_run, check=False)
    assert out.returncode != 0 and "Traceback" not in out.stdout + out.stderr, out.stderr
    assert relin_lines(out) == [expected], out.stderr


def test_dvc_repro_of_a_stage_params_yaml_dropped_runs_nothing(smoke_run, tmp_path):
    """`dvc repro -s bridge_niah-mha` after removing mha from lia_mtr.niah.bridges trained it; its command now
    regenerates dvc.yaml and stops in one line, and DVC then knows no such stage."""
    repo = clone_run(smoke_run, tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["lia_mtr"]["niah"]["bridges"].remove("mha")
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    model, checkpoints = repo / "results/lia_mtr/niah/mha/model", repo / "checkpoints/lia_mtr/niah/mha"
    before, started = _files(model), sorted(checkpoints.glob("*")) if checkpoints.is_dir() else []
    out = run(["dvc", "repro", "-s", "bridge_niah-mha"], repo, check=False, timeout=600)
    ours = [line for line in (out.stdout + out.stderr).splitlines() if line.startswith("relin")]
    assert out.returncode != 0 and len(ours) == 1, out.stdout + out.stderr
    assert ours[0].startswith("relin run-job: error: dvc.yaml regenerated for params.yaml's DAG (") and \
        "removed bridge_niah-mha), after `dvc repro` had read the old one: nothing was run" in ours[0], ours
    assert _files(model) == before and (sorted(checkpoints.glob("*")) if checkpoints.is_dir() else []) == started
    assert "bridge_niah-mha" not in yaml.safe_load((repo / "dvc.yaml").read_text())["stages"]
    again = run(["dvc", "repro", "-s", "bridge_niah-mha"], repo, check=False)
    assert again.returncode != 0 and "bridge_niah-mha" in again.stdout + again.stderr
