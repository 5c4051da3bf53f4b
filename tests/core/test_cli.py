"""The ``relin`` command's contract (issue #63 items 5 and 7): a version, every mistake one line naming it, and
``relin status``, DVC's status one line per stage."""
from __future__ import annotations

import subprocess

from ..workflow.conftest import workflow_env


def _relin(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(["relin", *argv], cwd=cwd, env=workflow_env(RELIN_TRACKING="0"), capture_output=True,
                          text=True, timeout=300)


def test_relin_version_names_the_release():
    proc = _relin("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("relin 0.1.0"), proc.stdout + proc.stderr


def test_an_unknown_option_of_a_stage_is_named_in_one_line_before_any_missing_one():
    proc = _relin("teacher-lm", "--stepz", "3")
    assert proc.returncode == 2 and proc.stderr == ("relin teacher-lm: error: unrecognized option --stepz; "
                                                     "`relin teacher-lm --help` lists the options\n")
    close = _relin("teacher-lm", "--chekpoints", "x")
    assert "unrecognized option --chekpoints (did you mean --checkpoints?)" in close.stderr
    missing = _relin("teacher-lm", "--arch", "qwen3")
    assert missing.returncode == 2 and len(missing.stderr.splitlines()) == 1
    assert missing.stderr.startswith("relin teacher-lm: error: the following arguments are required: --data")


def test_exporting_a_model_that_is_no_hybrid_is_one_line(tmp_path):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, head_dim=16)
    Qwen3ForCausalLM(config).save_pretrained(tmp_path / "teacher")
    proc = _relin("opal-export", "--config", "{}", "--model", str(tmp_path / "teacher"), "--out", "out", "--record",
                  "r.json", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("relin opal-export: error: export to qwen3_5_text: a qwen3 model (Qwen3ForCausalLM), "
                                  "not a relin hybrid; expected an OPAL hybrid")
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.json").exists()


def test_status_says_in_one_line_per_stage_what_changed_and_what_is_missing(tmp_path):
    from relin.pipeline.dvc_lock import commit_stages

    _relin_dvc_project(tmp_path, {"a": ("src.py", "x", "a.txt"), "b": ("a.txt", "y", "b.txt"),
                                  "c": ("src.py", "x", "c.txt"), "d": ("d.py", "y", "d.txt")})
    for name in ("a.txt", "b.txt", "d.txt"):
        (tmp_path / name).write_text(name)
    commit_stages(["a", "b", "d"], tmp_path)
    (tmp_path / "src.py").write_text("changed")
    (tmp_path / "params.yaml").write_text("x: 3\ny: 2\n")
    (tmp_path / "b.txt").unlink()
    proc = _relin("status", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.splitlines() == [
        "a: deps changed: src.py, params.yaml:x",
        "b: outputs missing: b.txt",
        "c: not in dvc.lock; outputs missing: c.txt",
        "d: up to date",
        "4 stages: 1 up to date, 2 changed, 1 not in dvc.lock"]


def test_status_of_a_fresh_clone_is_one_line_per_stage_of_dvc_status_and_a_count(tmp_path):
    """A fresh clone has no dvc.lock and no results: ``dvc status`` lists each stage's every source file; ``relin
    status`` the same stages, one line each, then the count."""
    import json

    from ..workflow.conftest import copy_repository

    repo = copy_repository(tmp_path)
    dvc = subprocess.run(["dvc", "status", "--json"], cwd=repo, env=workflow_env(), capture_output=True, text=True,
                         timeout=300, check=True)
    stages = list(json.loads(dvc.stdout))
    proc = _relin("status", cwd=repo)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    *lines, count = proc.stdout.splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == stages and len(stages) > 20
    assert all(line.split(": ", 1)[1].startswith("not in dvc.lock; ") and "outputs missing: " in line
               for line in lines), lines
    assert count == f"{len(stages)} stages: 0 up to date, 0 changed, {len(stages)} not in dvc.lock"


def test_status_outside_a_dvc_project_is_one_line(tmp_path):
    proc = _relin("status", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"relin status: error: DVC could not read the status of {tmp_path}: ")


def _relin_dvc_project(root, stages: dict[str, tuple[str, str, str]]) -> None:
    """A DVC project whose stage NAME: (dep, param, out) depends on the file dep and the param of params.yaml."""
    for cmd in (["git", "init", "-q"], ["dvc", "init", "-q"]):
        subprocess.run(cmd, cwd=root, env=workflow_env(), check=True)
    (root / "params.yaml").write_text("x: 1\ny: 2\n")
    for dep, _, _ in stages.values():
        if not dep.endswith(".txt"):
            (root / dep).write_text(dep)
    (root / "dvc.yaml").write_text("stages:\n" + "".join(
        f"  {name}:\n    cmd: {name}\n    deps: [{dep}]\n    params: [{param}]\n    outs:\n    - {out}:\n"
        "        persist: true\n" for name, (dep, param, out) in stages.items()))
