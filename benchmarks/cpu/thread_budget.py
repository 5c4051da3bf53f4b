"""A job's thread budget on this CPU: two jobs of one torch thread each against one job of two threads.

    python benchmarks/cpu/thread_budget.py                                   # the pretrained overlay's teacher
    python benchmarks/cpu/thread_budget.py --model results/pretrained/smollm2/model --steps 4

The pipeline runs each job on one thread (``threads: 1`` in every rule; Snakemake sets OMP_NUM_THREADS) and as many
jobs at once as ``--cores``. This measures that choice on the workloads the jobs spend their time on, a training step
(forward and backward under bf16 autocast, as the pretrained overlay trains) and a forward pass (evaluation, the
teacher in distillation), each in fresh processes whose thread count is fixed before torch is imported:

- ``1 job x 1 thread``: one process alone (the per-job figure sizing budgets);
- ``1 job x 2 threads``: one process on both cores (what a rule with ``threads: 2`` would get);
- ``2 jobs x 1 thread``: two processes at once (what ``--cores 2`` runs), their tokens summed.

Prints a table and writes ``benchmarks/results/thread_budget.json`` (the current figures; earlier ones in git).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from relin.envelope import Envelope

ROOT = Path(__file__).resolve().parents[2]
LAYOUTS = (("1 job x 1 thread", 1, 1), ("1 job x 2 threads", 1, 2), ("2 jobs x 1 thread", 2, 1))


def measure(model_dir: str, workload: str, rows: int, length: int, steps: int) -> dict:
    """Tokens per second of ``steps`` timed steps (after one warm-up) of ``workload`` in this process."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.train(workload == "train")
    ids = torch.randint(0, model.config.vocab_size, (rows, length), generator=torch.Generator().manual_seed(0))

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if workload == "train":
                model(ids, labels=ids).loss.backward()
                model.zero_grad(set_to_none=True)
            else:
                with torch.no_grad():
                    model(ids)

    step()
    began = time.perf_counter()
    for _ in range(steps):
        step()
    seconds = time.perf_counter() - began
    return {"tokens": rows * length * steps, "seconds": round(seconds, 3), "threads": torch.get_num_threads()}


def run_layout(args: argparse.Namespace, workload: str, jobs: int, threads: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    command = [sys.executable, __file__, "--model", args.model, "--rows", str(args.rows), "--length",
               str(args.length), "--steps", str(args.steps), "--one", workload]
    began = time.perf_counter()
    procs = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True) for _ in range(jobs)]
    results = []
    for proc in procs:
        out, _ = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"thread_budget: a {workload} measurement failed (exit {proc.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - began
    rate = sum(r["tokens"] / r["seconds"] for r in results)
    return {"workload": workload, "jobs": jobs, "threads": threads, "tokens_per_s": round(rate, 1),
            "per_job_tokens_per_s": [round(r["tokens"] / r["seconds"], 1) for r in results],
            "wall_s": round(wall, 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="results/pretrained/smollm2/model", help="a save_pretrained causal LM")
    parser.add_argument("--rows", type=int, default=2, help="rows per step")
    parser.add_argument("--length", type=int, default=512, help="tokens per row")
    parser.add_argument("--steps", type=int, default=4, help="timed steps per measurement (after one warm-up)")
    parser.add_argument("--one", choices=("train", "forward"), help=argparse.SUPPRESS)
    Envelope.add_argument(parser)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.model, args.one, args.rows, args.length, args.steps)))
        return 0
    if not (Path(args.model) / "config.json").is_file():
        raise SystemExit(f"thread_budget: --model {args.model}: not a save_pretrained folder (expected config.json; "
                         f"materialise it with `snakemake results/pretrained/smollm2/model --configfile "
                         f"workflow/configs/pretrained.yaml`)")
    envelope = Envelope.start("thread_budget", allow_dirty=args.allow_dirty, root=ROOT)
    rows = [{"layout": name, **run_layout(args, workload, jobs, threads)}
            for workload in ("train", "forward") for name, jobs, threads in LAYOUTS]
    print(f"{args.model}: {args.rows} rows x {args.length} tokens a step, bf16 autocast, {os.cpu_count()} CPUs")
    print(f"{'workload':<10}{'layout':<20}{'tokens/s':>10}{'per job':>18}")
    for r in rows:
        per_job = " + ".join(f"{v:.0f}" for v in r["per_job_tokens_per_s"])
        print(f"{r['workload']:<10}{r['layout']:<20}{r['tokens_per_s']:>10.1f}{per_job:>18}")
    record = {"model": args.model, "rows": args.rows, "length": args.length, "steps": args.steps, "results": rows}
    out = envelope.write(ROOT / "benchmarks" / "results" / "thread_budget.json", record)
    print(f"-> {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
