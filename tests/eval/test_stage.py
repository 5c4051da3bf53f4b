"""``relin eval-lm`` end to end on a tiny random Qwen3, and its one-line input errors."""
import csv
import json

import pytest
from datasets import DatasetDict

from relin.cli import main
from relin.eval.tasks import TASKS

CONFIG = json.dumps({"eval": {"batch_size": 4, "max_new_tokens": 12}})


@pytest.fixture
def data_dir(tmp_path, dataset, tokenizer):
    path = tmp_path / "synth_text"
    DatasetDict({"train": dataset, "test": dataset}).save_to_disk(str(path))
    tokenizer.save_pretrained(str(path / "tokenizer"))
    return path


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")


def _eval_args(model, data, out):
    return ["eval-lm", "--config", CONFIG, "--model", str(model), "--data", str(data), "--name", "tiny",
            "--out", str(out / "metrics.json"), "--by-length", str(out / "accuracy_by_length.csv"),
            "--items", str(out / "items.csv")]


def test_eval_lm_writes_metrics_and_accuracy_by_length(tmp_path, tiny_qwen3_dir, data_dir, rows, tokenizer):
    out = tmp_path / "eval"
    assert main(_eval_args(tiny_qwen3_dir, data_dir, out)) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    families = {"mqar", "niah_single", "niah_multiquery", "arithmetic"}
    assert metrics["name"] == "tiny"
    assert set(metrics["accuracy"]) == families == set(metrics["accuracy_by_length"])
    assert all(0.0 <= acc <= 1.0 for acc in metrics["accuracy"].values())
    assert 1.0 < metrics["perplexity"] < 10 * len(tokenizer)
    assert metrics["perplexity_tokens"] == sum(len(r["input_ids"]) - 1 for r in rows if r["task"] == "filler")
    with open(out / "accuracy_by_length.csv") as fh:
        table = list(csv.DictReader(fh))
    assert list(table[0]) == ["task", "length", "depth", "accuracy", "n"]
    assert sum(int(r["n"]) for r in table) == sum(1 for r in rows if r["task"] != "filler")
    with open(out / "items.csv") as fh:
        items = list(csv.DictReader(fh))
    assert [(r["task"], int(r["length"])) for r in items] == [(r["task"], r["length"]) for task in (*TASKS, "filler")
                                                              for r in rows if r["task"] == task]
    per_family = {}
    for item in items:
        if item["task"] != "filler":
            hits, total = per_family.get(item["task"], (0.0, 0.0))
            per_family[item["task"]] = (hits + float(item["hits"]), total + float(item["total"]))
    assert {t: h / n for t, (h, n) in per_family.items()} == pytest.approx(metrics["accuracy"])
    assert sum(int(r["tokens"]) for r in items) == metrics["perplexity_tokens"]
    assert metrics["chance"]["niah_single"] == 0.0 and 0.0 < metrics["chance"]["mqar"] < 1.0


def test_missing_model_directory_is_one_line_naming_it(tmp_path, data_dir, capsys):
    missing = tmp_path / "no_model"
    assert main(_eval_args(missing, data_dir, tmp_path / "eval")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err
    assert not (tmp_path / "eval").exists()


def test_missing_data_directory_is_one_line_naming_it(tmp_path, tiny_qwen3_dir, capsys):
    missing = tmp_path / "no_data"
    assert main(_eval_args(tiny_qwen3_dir, missing, tmp_path / "eval")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(missing) in err
