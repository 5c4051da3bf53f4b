"""Stage outputs as eval-lm and teacher-lm write them, with random numbers from a fixed seed."""
from __future__ import annotations

import json
import random

import pytest


@pytest.fixture(autouse=True)
def no_tracking(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")


@pytest.fixture
def rng():
    # Seeded: the report tests find each number's text in the page, and fresh draws made two of them collide (the
    # same rounded text in another cell) about one run in a hundred.
    return random.Random(0)


def write_metrics(path, name, rng) -> dict:
    lengths = (128, 256)
    by_length = {f: {str(n): rng.random() for n in lengths} for f in ("mqar", "niah_single", "arithmetic")}
    accuracy = {f: rng.random() for f in by_length}
    metrics = {"name": name, "perplexity": 1 + 100 * rng.random(), "perplexity_tokens": 1000, "accuracy": accuracy,
               "overall": sum(accuracy.values()) / len(accuracy), "accuracy_by_length": by_length,
               "n": {f: 10 for f in accuracy}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(metrics))
    return metrics


def write_history(path, rng, steps=5) -> list[dict]:
    rows = [{"step": 10 * (i + 1), "loss": 5 * rng.random() + 0.1, "lr": 1e-3 * rng.random(), "grad_norm": rng.random(),
             "tokens_per_s": 1000 * rng.random(), "elapsed_s": float(i)} for i in range(steps)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(",".join(rows[0]) + "\n" + "".join(",".join(str(v) for v in r.values()) + "\n" for r in rows))
    return rows


def write_by_length(path, rng) -> list[dict]:
    rows = [{"task": task, "length": n, "depth": d if task.startswith("niah") else -1.0, "accuracy": rng.random(),
             "n": 5} for task in ("niah_single", "mqar") for n in (128, 256) for d in (0.0, 0.5, 1.0)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("task,length,depth,accuracy,n\n" + "".join(",".join(str(v) for v in r.values()) + "\n"
                                                             for r in rows))
    return rows


@pytest.fixture
def results(tmp_path, rng):
    """``results/`` with two evaluated teachers, their histories and one accuracy_by_length.csv."""
    root = tmp_path / "results"
    out = {"metrics": {}, "histories": {}, "paths": {"eval": [], "history": [], "by_length": []}}
    for arch in ("qwen3", "gpt_neox"):
        name = f"teacher-{arch}"
        metrics_path = root / "eval" / name / "metrics.json"
        out["metrics"][name] = write_metrics(metrics_path, name, rng)
        history_path = root / "teacher" / arch / "history.csv"
        out["histories"][name] = write_history(history_path, rng)
        out["paths"]["eval"].append(str(metrics_path))
        out["paths"]["history"].append(str(history_path))
    by_length_path = root / "eval" / "teacher-qwen3" / "accuracy_by_length.csv"
    out["by_length"] = write_by_length(by_length_path, rng)
    out["paths"]["by_length"].append(str(by_length_path))
    return out
