"""HedgeMamba's stage-2 arm from issue #47 as ``relin hedgemamba-finetune`` runs it: Mamba-in-the-Llama's
initialisation (``--variant mamba_in_llama``) builds, trains and saves with its block's options in the config."""
import json

import pytest
import torch

from relin.cli import main
from relin.config.teacher import TeacherModelConfig
from relin.models.teachers import build_teacher

from .test_hedgemamba_stages import HEDGEMAMBA
from .toydata import word_tokenizer


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_mamba_in_llama_arm_trains_and_saves(toy_dataset, tmp_path):
    tokenizer = word_tokenizer()
    teacher = build_teacher(TeacherModelConfig(family="gpt_neox", hidden_size=32, num_hidden_layers=2,
                                               num_attention_heads=2, intermediate_size=64, rotary_pct=0.25),
                            tokenizer, seed=0)
    teacher.save_pretrained(tmp_path / "teacher", safe_serialization=True)
    tokenizer.save_pretrained(tmp_path / "teacher")
    out = tmp_path / "mil"
    assert main(["hedgemamba-finetune", "--config", json.dumps(HEDGEMAMBA), "--variant", "mamba_in_llama",
                 "--student", str(tmp_path / "teacher"), "--data", str(toy_dataset), "--decays",
                 str(tmp_path / "decays.json"), "--out", str(out), "--history", str(tmp_path / "h.csv"),
                 "--metrics", str(tmp_path / "m.json"), "--checkpoints", str(tmp_path / "ckpt")]) == 0
    config = json.loads((out / "config.json").read_text())
    assert {k: v for k, v in config["hedgemamba"].items() if k != "decay_init"} == {
        "conv_size": 4, "conv_activation": "silu", "feature_maps": False, "norm": "gated_rms", "conv_bias": True}
    decays = json.loads((tmp_path / "decays.json").read_text())
    assert all(1 <= torch.tensor(layer["A_log"]).exp().min() for layer in decays["init"])
    assert json.loads((tmp_path / "m.json").read_text())["steps"] == 2          # stage 2's updates
