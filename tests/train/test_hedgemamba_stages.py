"""HedgeMamba's stages as the paper config runs them: the teacher is a GPT-NeoX checkpoint on disk (a tiny
``GPTNeoXForCausalLM`` saved like a hub download), resolved by ``relin teacher-lm`` without the network, then
stage 1 (only φ changes), the exact conversion, stage 2 (embeddings frozen) and the random-init control at
stage 1 + 2's budget."""
import csv
import json
import math

import pytest
import torch

from relin.cli import main
from relin.config.teacher import TeacherModelConfig
from relin.config.train import TrainConfig
from relin.models.teachers import build_teacher, load_pretrained
from relin.stages.hedgemamba.finetune import arm_budget

from .toydata import word_tokenizer

TRAIN = {"steps": 2, "batch_size": 4, "warmup_steps": 0, "log_every": 1, "checkpoint_every": 1}
HEDGEMAMBA = {"hedgemamba.hedgehog": {"feature_map": "exp", "feature_position": "pre_rope"},
              "hedgemamba.kernel_backend": "auto",
              "hedgemamba.match": {"loss": "attention_ce", "query_block": 4, "train": {**TRAIN, "lr": 0.05}},
              "hedgemamba.mamba": {"conv_size": 4, "conv_activation": "identity"},
              "hedgemamba.finetune": {"freeze": "embeddings", "train": TRAIN},
              "hedgemamba.match.train": TRAIN}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def checkpoint(tmp_path):
    """A tiny Pythia-architecture checkpoint as the hub delivers one: config, safetensors weights, tokenizer."""
    tokenizer = word_tokenizer()
    model = build_teacher(TeacherModelConfig(family="gpt_neox", hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=2, intermediate_size=64, rotary_pct=0.25,
                                             initializer_range=0.2), tokenizer, seed=0)
    path = tmp_path / "pythia-tiny"
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def _stage(name, config, *args):
    return main([name, "--config", json.dumps(config), *map(str, args)])


def _outputs(tmp_path, name):
    return ["--out", tmp_path / name, "--history", tmp_path / f"{name}.csv", "--metrics", tmp_path / f"{name}.json",
            "--checkpoints", tmp_path / "ckpt" / name]


def test_paper_config_runs_every_stage_from_a_local_pythia_offline(checkpoint, toy_dataset, tmp_path):
    teacher = tmp_path / "teacher"
    config = {"teacher.models.gpt_neox": {"family": "gpt_neox", "pretrained": str(checkpoint)},
              "teacher.train": {"steps": 1, "warmup_steps": 0}}
    assert _stage("teacher-lm", config, "--arch", "gpt_neox", "--data", toy_dataset, "--out", teacher,
                  "--history", tmp_path / "h.csv", "--metrics", tmp_path / "m.json",
                  "--checkpoints", tmp_path / "ckpt" / "t") == 0
    assert _stage("hedgemamba-hedgehog-match", HEDGEMAMBA, "--teacher", teacher, "--data", toy_dataset,
                  *_outputs(tmp_path, "hedgehog")) == 0
    source, hedgehog = load_pretrained(str(teacher)), load_pretrained(str(tmp_path / "hedgehog"))
    assert hedgehog.config.mixer_types == ["hedgehog"] * 2 and hedgehog.config.rotary_pct == 0.25
    assert hedgehog.lm_head.weight.equal(source.get_output_embeddings().weight)
    assert not hedgehog.model.layers[0].linear_attn.feature_map_q.weight.equal(torch.eye(16).expand(2, 16, 16))
    with open(tmp_path / "hedgehog.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 2 and {"attn_kl/layer0", "attn_kl/layer1", "match_loss/layer1"} <= set(rows[0])

    assert _stage("hedgemamba-init", HEDGEMAMBA, "--hedgehog", tmp_path / "hedgehog", "--data", toy_dataset,
                  "--out", tmp_path / "init", "--check", tmp_path / "check.json") == 0
    check = json.loads((tmp_path / "check.json").read_text())
    assert check["max_abs_logit_diff"] < 1e-4 < check["max_abs_logit"]

    assert _stage("hedgemamba-finetune", HEDGEMAMBA, "--variant", "hedgemamba", "--student", tmp_path / "init",
                  "--data", toy_dataset, "--decays", tmp_path / "finetune-decays.json",
                  *_outputs(tmp_path, "finetune")) == 0
    init, tuned = load_pretrained(str(tmp_path / "init")), load_pretrained(str(tmp_path / "finetune"))
    assert tuned.model.embed_tokens.weight.equal(init.model.embed_tokens.weight)
    assert tuned.lm_head.weight.equal(init.lm_head.weight)
    assert not tuned.model.layers[0].mamba.conv.weight.equal(init.model.layers[0].mamba.conv.weight)
    assert not tuned.model.layers[1].mamba.z_proj.weight.equal(init.model.layers[1].mamba.z_proj.weight)
    decays = json.loads((tmp_path / "finetune-decays.json").read_text())
    # the near-identity init: A = 1/2 (A_log = -ln 2), the decay's smallness in Δ
    assert [layer["layer"] for layer in decays["init"]] == [0, 1]
    assert decays["init"][0]["A_log"][0] == pytest.approx(-math.log(2), abs=1e-6)
    assert abs(decays["trained"][0]["A_log"][0] + 20.0) > 1e-3, "Λ moves in stage 2"

    assert _stage("hedgemamba-finetune", HEDGEMAMBA, "--variant", "random", "--student", teacher,
                  "--data", toy_dataset, "--decays", tmp_path / "random-decays.json",
                  *_outputs(tmp_path, "random")) == 0
    assert json.loads((tmp_path / "random.json").read_text())["steps"] == 2  # stage 2's updates, stage 1's rows in them
    assert _stage("hedgemamba-finetune", HEDGEMAMBA, "--variant", "no_match", "--student", teacher,
                  "--data", toy_dataset, "--decays", tmp_path / "no_match-decays.json",
                  *_outputs(tmp_path, "no_match")) == 0
    assert json.loads((tmp_path / "no_match.json").read_text())["steps"] == 2


def test_the_control_budget_is_the_same_updates_and_rows():
    match, finetune = TrainConfig(steps=100, batch_size=16), TrainConfig(steps=200, batch_size=16)
    control = arm_budget("random", match, finetune)
    assert control.steps == 200 and control.batch_size * control.grad_accum == 24
    assert control.steps * control.batch_size * control.grad_accum == 100 * 16 + 200 * 16
    assert arm_budget("hedgemamba", match, finetune) == finetune


def test_a_qwen3_teacher_is_one_line(toy_dataset, tmp_path, capsys):
    qwen = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                            num_key_value_heads=2, head_dim=16, intermediate_size=64), word_tokenizer())
    qwen.save_pretrained(tmp_path / "qwen", safe_serialization=True)
    word_tokenizer().save_pretrained(tmp_path / "qwen")
    assert _stage("hedgemamba-hedgehog-match", HEDGEMAMBA, "--teacher", tmp_path / "qwen", "--data", toy_dataset,
                  *_outputs(tmp_path, "hedgehog")) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "HedgeMamba converts gpt_neox" in errors[0]
    assert not (tmp_path / "hedgehog").exists()
