"""Does a teacher's MQAR key match form within its short-row stages, and for which seeds?

    python benchmarks/cpu/teacher_recall_screen.py --data results/data/synth_text --seeds 0 1 2
    python benchmarks/cpu/teacher_recall_screen.py --data results/data/synth_text --seeds 0 1 2 \\
        --set teacher.train.lr=0.0005 --jobs 2
    python benchmarks/cpu/teacher_recall_screen.py --overlay workflow/configs/h200.yaml --steps 1300 --seeds 0 \\
        --data results/data/synth_text --set teacher.models.qwen3.initializer_range=0.02     # on a GPU

Trains ``relin teacher-lm`` for the first ``--steps`` steps of ``teacher.train`` (the curriculum's stages
that end by then; by default the <= 64-token MQAR stages), once per seed, tracking off, and prints the
training accuracy every 100 steps and the first step at which it reaches ``--formed`` (the jump that
marks the induction heads' key match). In those stages the rows are MQAR (and the few short arithmetic
rows), so a run stuck near 0.3 at 8 pairs has learnt to copy a value of the context, not to match its
key. A screen costs ~200 s per seed on one core against ~900 s for a whole teacher; the full
evaluation (NIAH) still needs ``snakemake results/eval/teacher-qwen3/metrics.json``. Writes
``benchmarks/results/teacher_recall_screen.json`` (the current screen; earlier ones are in git history), or ``--out``.
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from relin.config.loader import as_dict
from relin.config.params import load_layers, read_yaml
from relin.envelope import Envelope
from relin.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def override(dotted: str) -> tuple[str, dict]:
    """One ``--set a.b.c=value`` as a named overlay layer ``{"a": {"b": {"c": value}}}`` (value read as YAML)."""
    key, sep, raw = dotted.partition("=")
    if not sep:
        sys.exit(f"--set {dotted!r}: expected KEY=VALUE, e.g. teacher.train.lr=0.0005")
    layer = yaml.safe_load(raw)
    for part in reversed(key.split(".")):
        layer = {part: layer}
    return f"--set {key}", layer


def stage_sections(params: dict, arch: str, steps: int, seed: int) -> dict:
    model = params["teacher"]["models"][arch]
    train = copy.deepcopy(params["teacher"]["train"])
    stages = [s for s in train["curriculum"] if s["until_step"] <= steps]
    if not stages:
        sys.exit(f"--steps {steps}: no curriculum stage of teacher.train ends by then "
                 f"(first ends at {train['curriculum'][0]['until_step']})")
    train.update(steps=steps, seed=seed, curriculum=stages, checkpoint_every=10 * steps)
    return {f"teacher.models.{arch}": model, "teacher.train": train}


def screen_one(sections: dict, arch: str, data: Path, workdir: Path, formed: float) -> dict:
    out = workdir / f"seed{sections['teacher.train']['seed']}"
    env = dict(os.environ, RELIN_TRACKING="0", OMP_NUM_THREADS="1")
    began = time.perf_counter()
    proc = subprocess.run(
        ["relin", "teacher-lm", "--config", json.dumps(sections), "--arch", arch, "--data", str(data),
         "--out", str(out / "model"), "--history", str(out / "history.csv"), "--metrics", str(out / "metrics.json"),
         "--checkpoints", str(out / "checkpoints")], env=env, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(f"relin teacher-lm failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    history = [(int(r["step"]), float(r["accuracy"])) for r in csv.DictReader((out / "history.csv").open())]
    first = next((step for step, acc in history if acc >= formed), None)
    return {"seed": sections["teacher.train"]["seed"], "seconds": round(time.perf_counter() - began, 1),
            "formed_at": first, "accuracy": {step: round(acc, 3) for step, acc in history}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="synth-text dataset (results/data/synth_text)")
    parser.add_argument("--params", type=Path, default=ROOT / "params.yaml")
    parser.add_argument("--overlay", type=Path, action="append", default=[],
                        help="config overlay merged over --params (e.g. workflow/configs/h200.yaml)")
    parser.add_argument("--arch", default="qwen3", help="key of teacher.models")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=1200, help="train this many steps (whole curriculum stages)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a params key")
    parser.add_argument("--formed", type=float, default=0.8, help="training accuracy that counts as formed")
    parser.add_argument("--jobs", type=int, default=1, help="seeds trained at once (one core each)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "teacher_recall_screen.json",
                        help="JSON to write (one per screen when several run at once)")
    Envelope.add_argument(parser)
    args = parser.parse_args()
    envelope = Envelope.start("teacher_recall_screen", allow_dirty=args.allow_dirty, root=ROOT)
    if not (args.data / "tokenizer").is_dir():
        sys.exit(f"--data {args.data}: not a synth-text dataset (expected a directory with tokenizer/); "
                 "build it with snakemake results/data/synth_text")
    try:  # the project's strict loader: an unknown key or a wrong type is one line naming the --set
        params = as_dict(load_layers([(str(path), read_yaml(path)) for path in (args.params, *args.overlay)]
                                     + [override(dotted) for dotted in args.set]))
    except ConfigError as err:
        sys.exit(str(err))
    if args.arch not in params["teacher"]["models"]:
        sys.exit(f"--arch {args.arch}: not a key of teacher.models (have {sorted(params['teacher']['models'])})")

    with tempfile.TemporaryDirectory(prefix="teacher-screen-") as tmp, ThreadPoolExecutor(args.jobs) as pool:
        runs = list(pool.map(lambda seed: screen_one(stage_sections(params, args.arch, args.steps, seed),
                                                     args.arch, args.data, Path(tmp), args.formed), args.seeds))

    record = {"arch": args.arch, "steps": args.steps, "overlays": [str(p) for p in args.overlay], "overrides": args.set,
              "formed_threshold": args.formed, "runs": runs}
    path = envelope.write(args.out, record)

    print(f"\n{args.arch}, {args.steps} steps, overrides: {' '.join(args.set) or 'none'}")
    print("| seed | formed at | training accuracy every 100 steps | s |\n|---|---|---|---|")
    for run in runs:
        acc = " ".join(f"{a:.2f}" for step, a in run["accuracy"].items() if step % 100 == 0)
        print(f"| {run['seed']} | {run['formed_at'] or 'no'} | {acc} | {run['seconds']:.0f} |")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
