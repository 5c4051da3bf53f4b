"""``relin teacher-lm`` end to end on a tiny dataset: outputs, resume, divergence, ZeRO-2 on 2 CPU ranks."""
import csv
import json
import os
import subprocess
import sys

import pytest

from relin.cli import main
from relin.models.teachers import load_pretrained
from relin.train import objectives

from .test_loop import NaNAt

MODEL = {"family": "qwen3", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 64}


def _args(data, root, **train):
    config = {"teacher.models.qwen3": MODEL,
              "teacher.train": {"steps": 6, "batch_size": 8, "checkpoint_every": 3, "log_every": 2, **train}}
    return ["teacher-lm", "--config", json.dumps(config), "--arch", "qwen3", "--data", str(data),
            "--out", str(root / "model"), "--history", str(root / "history.csv"),
            "--metrics", str(root / "train_metrics.json"), "--checkpoints", str(root / "ckpt")]


@pytest.fixture(autouse=True)
def _no_tracking(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")


def test_trains_writes_outputs_and_resumes_when_rerun(toy_dataset, tmp_path):
    assert main(_args(toy_dataset, tmp_path)) == 0
    model = load_pretrained(str(tmp_path / "model"))
    assert model.config.vocab_size == 28 and (tmp_path / "model" / "tokenizer.json").is_file()
    rows = list(csv.DictReader(open(tmp_path / "history.csv")))
    assert [int(r["step"]) for r in rows] == [2, 4, 6]
    assert {"loss", "lr", "grad_norm", "tokens_per_s"} <= set(rows[0])
    metrics = json.loads((tmp_path / "train_metrics.json").read_text())
    assert metrics["steps"] == 6 and metrics["resumed_from"] == 0
    assert main(_args(toy_dataset, tmp_path)) == 0
    assert json.loads((tmp_path / "train_metrics.json").read_text())["resumed_from"] == 6


def test_divergence_exits_3_keeps_checkpoint_and_writes_nothing(toy_dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(objectives.OBJECTIVES, "ce", lambda: NaNAt(calls=5))
    assert main(_args(toy_dataset, tmp_path)) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("relin teacher-lm: error: loss became nan at step 5; last good checkpoint kept at")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["step-000003"]


def test_missing_data_is_one_line_error(tmp_path, capsys):
    assert main(_args(tmp_path / "nope", tmp_path)) == 2
    assert "no such directory (expected the output of relin synth-text)" in capsys.readouterr().err


def test_zero2_on_two_cpu_ranks_shards_optimizer_and_resumes(toy_dataset, tmp_path):
    env = {**os.environ, "RELIN_TRACKING": "0", "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              "-m", "relin.cli"]
    first = subprocess.run(launch + _args(toy_dataset, tmp_path, backend="deepspeed", grad_accum=2),
                           env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    shards = sorted(p.name for p in (tmp_path / "ckpt" / "step-000006" / "zero2").glob("zero_pp_rank_*"))
    assert shards == ["zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
    assert first.stderr.count("train: 100%") == 1, "only rank 0 shows progress"
    metrics = json.loads((tmp_path / "train_metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["backend"] == "deepspeed"
    assert len(list(csv.DictReader(open(tmp_path / "history.csv")))) == 3
    second = subprocess.run(launch + _args(toy_dataset, tmp_path, backend="deepspeed", grad_accum=2, steps=8),
                            env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads((tmp_path / "train_metrics.json").read_text())["resumed_from"] == 6
    assert load_pretrained(str(tmp_path / "model")).config.num_hidden_layers == 1
