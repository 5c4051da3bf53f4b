"""``relin opal-convert`` as the paper config runs it: the teacher is a checkpoint on disk (here a tiny
``Qwen3ForCausalLM`` saved like a hub download), resolved by ``relin teacher-lm`` and converted
without the network."""
import json

import pytest

from relin.cli import main
from relin.config.teacher import TeacherModelConfig
from relin.models.teachers import build_teacher, load_pretrained

from .toydata import word_tokenizer

OPAL = {"opal.keep_every": 4, "opal.attention_layers": [], "opal.kernel_backend": "auto",
        "opal.gdn": {"conv_size": 4, "conv_activation": "silu", "qk_norm": True, "allow_neg_eigval": False},
        "opal.swa": {"window": 8, "sinks": 2}}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def checkpoint(tmp_path):
    """A tiny Qwen3 checkpoint as the hub delivers one: config, safetensors weights, tokenizer."""
    tokenizer = word_tokenizer()
    model = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=8,
                                             num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                             intermediate_size=64), tokenizer, seed=0)
    path = tmp_path / "Qwen3-tiny"
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def test_paper_config_resolves_a_local_qwen3_and_converts_it_offline(checkpoint, tmp_path):
    teacher = tmp_path / "teacher"
    config = {"teacher.models.qwen3": {"family": "qwen3", "pretrained": str(checkpoint)},
              "teacher.train": {"steps": 1, "warmup_steps": 0}}
    assert main(["teacher-lm", "--config", json.dumps(config), "--arch", "qwen3", "--data", str(tmp_path / "none"),
                 "--out", str(teacher), "--history", str(tmp_path / "h.csv"), "--metrics", str(tmp_path / "m.json"),
                 "--checkpoints", str(tmp_path / "ckpt")]) == 0
    for mixer, expected in (("gdn", ["gdn", "gdn", "gdn", "attention"] * 2),
                            ("swa", ["swa", "swa", "swa", "attention"] * 2)):
        out = tmp_path / mixer
        assert main(["opal-convert", "--config", json.dumps(OPAL), "--teacher", str(teacher),
                     "--mixer", mixer, "--out", str(out)]) == 0
        hybrid = load_pretrained(str(out))
        assert hybrid.config.mixer_types == expected and (out / "tokenizer.json").is_file()
        teacher_model = load_pretrained(str(teacher))
        kept = hybrid.model.layers[3].self_attn.q_proj.weight
        assert kept.equal(teacher_model.model.layers[3].self_attn.q_proj.weight)


def test_a_teacher_too_shallow_for_the_pattern_is_one_line(checkpoint, tmp_path, capsys):
    opal = {**OPAL, "opal.attention_layers": [9]}
    assert main(["opal-convert", "--config", json.dumps(opal), "--teacher", str(checkpoint),
                 "--mixer", "gdn", "--out", str(tmp_path / "x")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "kept attention layers [9]: expected at least one index in [0, 8)" in errors[0]
    assert not (tmp_path / "x").exists()
