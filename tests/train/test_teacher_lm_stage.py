"""``relin teacher-lm`` end to end on a tiny dataset: outputs, checkpoints keyed by the run's
identity, resume after a crash, corrupt inputs, divergence, ZeRO-2 on 2 CPU ranks."""
import csv
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from relin.cli import main
from relin.io import read_manifest
from relin.models.teachers import load_pretrained
from relin.train import objectives

from .test_loop import NaNAt

MODEL = {"family": "qwen3", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
         "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 64}


def _args(data, root, **train):
    config = {"teacher.models.qwen3": MODEL,
              "teacher.train": {"steps": 6, "batch_size": 8, "warmup_steps": 2, "checkpoint_every": 3,
                                "log_every": 2, **train}}
    return ["teacher-lm", "--config", json.dumps(config), "--arch", "qwen3", "--data", str(data),
            "--out", str(root / "model"), "--history", str(root / "history.csv"),
            "--metrics", str(root / "train_metrics.json"), "--checkpoints", str(root / "ckpt")]


@pytest.fixture(autouse=True)
def _no_tracking(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")


def _run_dirs(root):
    return sorted(p for p in (root / "ckpt").iterdir()) if (root / "ckpt").is_dir() else []


def test_trains_writes_deterministic_outputs_and_releases_its_checkpoints(toy_dataset, tmp_path):
    assert main(_args(toy_dataset, tmp_path)) == 0
    model = load_pretrained(str(tmp_path / "model"))
    assert model.config.vocab_size == 28 and (tmp_path / "model" / "tokenizer.json").is_file()
    rows = list(csv.DictReader(open(tmp_path / "history.csv")))
    assert [int(r["step"]) for r in rows] == [2, 4, 6]
    assert {"loss", "lr", "grad_norm"} <= set(rows[0]) and not {"tokens_per_s", "elapsed_s"} & set(rows[0])
    metrics = json.loads((tmp_path / "train_metrics.json").read_text())
    assert metrics["steps"] == 6 and not {"wall_s", "resumed_from"} & set(metrics)
    record = read_manifest(tmp_path / "train_metrics.json")
    assert record["resumed_from"] == 0 and record["wall_s"] > 0
    assert _run_dirs(tmp_path) == [], "a finished run leaves no checkpoint behind"

    outputs = {name: (tmp_path / name).read_bytes() for name in ("history.csv", "train_metrics.json")}
    weights = (tmp_path / "model" / "model.safetensors").read_bytes()
    assert main(_args(toy_dataset, tmp_path)) == 0
    assert read_manifest(tmp_path / "train_metrics.json")["resumed_from"] == 0, "a rerun trains from step 0"
    assert {name: (tmp_path / name).read_bytes() for name in outputs} == outputs
    assert (tmp_path / "model" / "model.safetensors").read_bytes() == weights


def test_crashed_run_resumes_only_with_the_same_identity(toy_dataset, tmp_path, monkeypatch, capsys):
    straight = tmp_path / "straight"
    assert main(_args(toy_dataset, straight)) == 0
    monkeypatch.setitem(objectives.OBJECTIVES, "ce", lambda: NaNAt(calls=5))
    assert main(_args(toy_dataset, tmp_path)) == 3
    (run_dir,) = _run_dirs(tmp_path)
    assert [p.name for p in run_dir.glob("step-*")] == ["step-000003"]
    identity = json.loads((run_dir / "identity.json").read_text())
    assert set(identity) == {"config", "inputs", "code", "versions"}
    assert identity["inputs"] == {str(toy_dataset): identity["inputs"][str(toy_dataset)]}
    monkeypatch.undo()

    assert main(_args(toy_dataset, tmp_path, lr=0.002)) == 0, "another config"
    assert read_manifest(tmp_path / "train_metrics.json")["resumed_from"] == 0
    assert _run_dirs(tmp_path) == [run_dir], "the crashed run's checkpoints stay for its own rerun"

    capsys.readouterr()
    assert main(_args(toy_dataset, tmp_path)) == 0
    assert f"resuming from step 3 ({run_dir / 'step-000003'})" in capsys.readouterr().err
    assert read_manifest(tmp_path / "train_metrics.json")["resumed_from"] == 3
    assert (tmp_path / "model/model.safetensors").read_bytes() == (straight / "model/model.safetensors").read_bytes()
    assert _run_dirs(tmp_path) == []


def test_divergence_exits_3_keeps_checkpoint_and_writes_nothing(toy_dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(objectives.OBJECTIVES, "ce", lambda: NaNAt(calls=5))
    assert main(_args(toy_dataset, tmp_path)) == 3
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("relin teacher-lm: error: loss became nan at step 5; last good checkpoint kept at")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]
    assert [p.name for p in _run_dirs(tmp_path)[0].glob("step-*")] == ["step-000003"]


def test_missing_data_is_one_line_error(tmp_path, capsys):
    assert main(_args(tmp_path / "nope", tmp_path)) == 2
    assert "no such directory (expected a synth_text DatasetDict" in capsys.readouterr().err


def _damage(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


@pytest.mark.parametrize("damaged, message", [
    ("train/data-00000-of-00001.arrow", "unreadable, a file is damaged"),
    ("tokenizer/tokenizer.json", "unreadable, a file is damaged"),
    ("train/state.json", "unreadable, a file is damaged"),
], ids=["truncated arrow", "truncated tokenizer.json", "truncated state.json"])
def test_corrupt_input_is_one_line_naming_it_and_overwrites_nothing(toy_dataset, tmp_path, capsys, damaged, message):
    import shutil

    data = shutil.copytree(toy_dataset, tmp_path / "data")
    _damage(data / damaged)
    out = tmp_path / "out"
    out.mkdir()
    (out / "history.csv").write_text("step,loss\n1,2.0\n")
    capsys.readouterr()
    assert main(_args(data, out)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], lines
    where = data / damaged.split("/")[0] if damaged.startswith("tokenizer") else data
    assert lines[0].startswith(f"relin teacher-lm: error: {'tokenizer' if 'tokenizer' in damaged else 'data'} {where}")
    assert sorted(p.name for p in out.iterdir()) == ["history.csv"]
    assert (out / "history.csv").read_text() == "step,loss\n1,2.0\n"


def test_only_unreadable_checkpoints_is_one_line_and_writes_nothing(toy_dataset, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(objectives.OBJECTIVES, "ce", lambda: NaNAt(calls=5))
    assert main(_args(toy_dataset, tmp_path)) == 3
    monkeypatch.undo()
    (state,) = tmp_path.glob("ckpt/*/step-*/state.pt")
    state.write_bytes(os.urandom(2048))
    capsys.readouterr()
    assert main(_args(toy_dataset, tmp_path)) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith(f"relin teacher-lm: error: checkpoint {state.parent}: unreadable (")
    assert lines[-1].endswith("to train from step 0")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_zero2_on_two_cpu_ranks_shards_optimizer_and_resumes_after_a_kill(toy_dataset, tmp_path):
    env = {**os.environ, "RELIN_TRACKING": "0", "OMP_NUM_THREADS": "1"}
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
              "-m", "relin.cli"]
    argv = launch + _args(toy_dataset, tmp_path, backend="deepspeed", grad_accum=2, steps=8, checkpoint_every=4)
    first = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None and not list(tmp_path.glob("ckpt/*/step-*")):
        time.sleep(0.05)
    for process in [*psutil.Process(first.pid).children(recursive=True), psutil.Process(first.pid)]:
        process.kill()  # the launcher's workers run in sessions of their own
    first.wait(timeout=60)
    assert not (tmp_path / "train_metrics.json").exists(), "the run finished before it could be killed"
    step_dir = max(tmp_path.glob("ckpt/*/step-*"))
    assert sorted(p.name for p in step_dir.glob("zero2/zero_pp_rank_*")) == [
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]

    second = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    resumes = [line for line in second.stderr.splitlines() if "resuming from step" in line]
    assert len(resumes) == 1, "rank 0 alone reports the resume"
    metrics = json.loads((tmp_path / "train_metrics.json").read_text())
    assert metrics["world_size"] == 2 and metrics["backend"] == "deepspeed" and metrics["steps"] == 8
    assert read_manifest(tmp_path / "train_metrics.json")["resumed_from"] >= 4
    assert load_pretrained(str(tmp_path / "model")).config.num_hidden_layers == 1


def test_a_teacher_trains_on_its_own_curriculum_where_its_model_config_sets_one(toy_dataset, tmp_path):
    args = _args(toy_dataset, tmp_path, curriculum=[{"until_step": 2, "max_len": 64}])
    config = json.loads(args[2])
    config["teacher.models.qwen3"] = {**MODEL, "curriculum": [{"until_step": 4, "max_len": 9}]}
    args[2] = json.dumps(config)
    assert main(args) == 0
    max_len = {int(r["step"]): int(r["max_len"]) for r in csv.DictReader(open(tmp_path / "history.csv"))}
    assert max_len[2] == max_len[4] == 9 < max_len[6], max_len
