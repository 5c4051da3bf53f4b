"""The ``relin`` command's contract (issue #63 item 7): a version, and every mistake one line naming it."""
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
    proc = _relin("export", "--config", "{}", "--model", str(tmp_path / "teacher"), "--out", "out", "--record",
                  "r.json", cwd=tmp_path)
    assert proc.returncode == 2 and len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("relin export: error: export to qwen3_5_text: a qwen3 model (Qwen3ForCausalLM), "
                                  "not a relin hybrid; expected an OPAL hybrid")
    assert not (tmp_path / "out").exists() and not (tmp_path / "r.json").exists()
