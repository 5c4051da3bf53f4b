"""DeepSpeed ZeRO-2 teacher training on 1 vs N processes, with a kill-and-resume, in one run.

Runs ``relin teacher-lm`` (the same entry point and config mechanism as the DAG) four times:

1. ``ref``:    1 process, global batch G (the baseline curve);
2. ``zero2``:  N processes under ``torchrun``, G/N per rank (same global batch);
3. ``resume``: the N-process run killed after its first checkpoint, then rerun: it must resume from
   the ZeRO checkpoint and continue the curve.

and checks: both ranks trained, the checkpoint holds N optimizer shards (``[bf16_]zero_pp_rank_*``), only
rank 0 logged to MLflow (one child run per invocation), the N-process loss curve matches the
1-process one within noise, and the resumed curve continues it. Prints a table last and writes
JSON to ``benchmarks/results/zero2_scaling.json`` (and ``$OUT`` when set).

    python benchmarks/gpu/zero2_scaling.py --nproc 2                 # on a 2-GPU machine (NCCL, bf16)
    python benchmarks/gpu/zero2_scaling.py --nproc 2 --tiny          # on a CPU (gloo, fp32): a dry run
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

import psutil

from relin.envelope import Envelope

GPU_MODEL = {"family": "qwen3", "hidden_size": 512, "num_hidden_layers": 8, "num_attention_heads": 8,
             "num_key_value_heads": 4, "head_dim": 64, "intermediate_size": 1536,
             "max_position_embeddings": 1024}
# DeepSpeed names the shards zero_pp_rank_<r>_..._optim_states.pt, with a bf16_ prefix under its bf16 optimizer
SHARD_GLOB = "*zero_pp_rank_*_optim_states.pt"
TINY_MODEL = {"family": "qwen3", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 128,
              "max_position_embeddings": 1024}


def train_config(args, per_rank_batch: int) -> dict:
    return {"steps": args.steps, "batch_size": per_rank_batch, "lr": args.lr, "warmup_steps": args.steps // 10,
            "schedule": "cosine", "checkpoint_every": args.checkpoint_every, "log_every": args.log_every,
            "backend": "deepspeed", "precision": "auto", "seed": 0, "curriculum": [],
            "bucket_by_length": True}


def relin_command(args, name: str, nproc: int, per_rank_batch: int) -> list[str]:
    work = Path(args.work)
    cfg = {"teacher.models.zero2": TINY_MODEL if args.tiny else GPU_MODEL,
           "teacher.train": train_config(args, per_rank_batch)}
    relin = shutil.which("relin") or "relin"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}"]
    return launcher + [relin, "teacher-lm", "--config", json.dumps(cfg), "--arch", "zero2",
                       "--data", str(work / "data"), "--out", str(work / name / "model"),
                       "--history", str(work / name / "history.csv"),
                       "--metrics", str(work / name / "train_metrics.json"),
                       "--checkpoints", str(work / name / "checkpoints")]


def run(cmd: list[str], log: Path, env: dict, kill_when=None) -> tuple[int, float]:
    """Run ``cmd`` to completion, or until ``kill_when()`` is true (then SIGKILL its process group)."""
    began = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        while proc.poll() is None:
            if kill_when is not None and kill_when():
                # torchrun starts its workers in sessions of their own: kill every descendant, not
                # only the launcher's process group, or the orphaned workers finish the run.
                victims = [proc, *psutil.Process(proc.pid).children(recursive=True)]
                for victim in victims:
                    with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
                        victim.send_signal(signal.SIGKILL)
                psutil.wait_procs([psutil.Process(v.pid) for v in victims[1:] if psutil.pid_exists(v.pid)],
                                  timeout=30)
                proc.wait()
                break
            time.sleep(0.1)
    return proc.returncode, time.perf_counter() - began


def read_history(path: Path) -> list[dict]:
    with open(path) as fh:
        return [{k: float(v) for k, v in row.items() if v not in ("", None)} for row in csv.DictReader(fh)]


def curve_gap(a: list[dict], b: list[dict], skip: int) -> float:
    """Mean |loss_a - loss_b| / mean loss over logged steps present in both (after ``skip`` steps)."""
    la = {int(r["step"]): r["loss"] for r in a}
    lb = {int(r["step"]): r["loss"] for r in b}
    steps = sorted(s for s in set(la) & set(lb) if s > skip)
    diff = statistics.mean(abs(la[s] - lb[s]) for s in steps)
    return diff / statistics.mean(la[s] for s in steps)


def mlflow_stage_runs(tracking_uri: str, parent: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    exp = client.get_experiment_by_name("relin")
    return client.search_runs([exp.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nproc", type=int, default=2, help="processes (GPUs) of the ZeRO-2 runs")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--global-batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--checkpoint-every", type=int, default=100)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--tiny", action="store_true", help="tiny model and data: a CPU dry run")
    parser.add_argument("--work", default="/tmp/relin-zero2")
    parser.add_argument("--results-dir", default=str(Path(__file__).parents[1] / "results"))
    Envelope.add_argument(parser)
    args = parser.parse_args()
    envelope = Envelope.start("zero2_scaling", allow_dirty=args.allow_dirty, packages=("deepspeed",))

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    tracking_uri = f"sqlite:///{work / 'mlflow.db'}"
    env = dict(os.environ, RELIN_TRACKING_CONFIG=json.dumps({"tracking_uri": tracking_uri,
                                                             "system_metrics": False}),
               NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1")
    overlay = ["--overlay", "workflow/configs/smoke.yaml"] if args.tiny else []
    rc, data_s = run(["relin", "synth-text", "--out", str(work / "data"), *overlay], work / "synth.log", env)
    assert rc == 0, (work / "synth.log").read_text()[-2000:]

    from relin.config.tracking import TrackingConfig
    from relin.tracking import init_pipeline

    parent = init_pipeline(TrackingConfig(tracking_uri=tracking_uri, system_metrics=False), "zero2-scaling")
    env["RELIN_PARENT_RUN_ID"] = parent
    n, g = args.nproc, args.global_batch
    logs = {}
    rc, logs["ref_s"] = run(relin_command(args, "ref", 1, g), work / "ref.log", env)
    assert rc == 0, (work / "ref.log").read_text()[-3000:]
    rc, logs["zero2_s"] = run(relin_command(args, "zero2", n, g // n), work / "zero2.log", env)
    assert rc == 0, (work / "zero2.log").read_text()[-3000:]

    ckpt = work / "resume" / "checkpoints"

    def first_checkpoint_written() -> bool:
        """A checkpoint before the last step holds its optimizer shards: kill the run mid-training."""
        return any(int(d.name.split("-")[-1]) < args.steps and len(list(d.rglob(SHARD_GLOB))) == n
                   for d in ckpt.glob("step-*") if d.name.split("-")[-1].isdigit())

    rc_kill, logs["killed_s"] = run(relin_command(args, "resume", n, g // n), work / "resume-killed.log", env,
                                    kill_when=first_checkpoint_written)
    shards = sorted({p.name for p in ckpt.rglob(SHARD_GLOB)})
    rc, logs["resumed_s"] = run(relin_command(args, "resume", n, g // n), work / "resume.log", env)
    assert rc == 0, (work / "resume.log").read_text()[-3000:]

    ref, z2, res = (read_history(work / k / "history.csv") for k in ("ref", "zero2", "resume"))
    metrics = {k: json.loads((work / k / "train_metrics.json").read_text()) for k in ("ref", "zero2", "resume")}
    skip = args.steps // 10
    runs = mlflow_stage_runs(tracking_uri, parent)
    tok_1 = statistics.median(r["tokens_per_s"] for r in ref[1:]) if "tokens_per_s" in ref[0] else float("nan")
    tok_n = statistics.median(r["tokens_per_s"] for r in z2[1:]) if "tokens_per_s" in z2[0] else float("nan")
    report = {
        "nproc": n,
        "model": TINY_MODEL if args.tiny else GPU_MODEL, "steps": args.steps, "global_batch": g,
        "wall_s": logs,
        "tokens_per_s_total": {"1": tok_1, str(n): tok_n},
        "tokens_per_s_per_gpu": {"1": tok_1, str(n): tok_n / n},
        "scaling_efficiency": tok_n / (n * tok_1),
        "final_loss": {k: m.get("final_loss") for k, m in metrics.items()},
        "loss_curve_gap_rel": {"zero2_vs_ref": curve_gap(ref, z2, skip), "resume_vs_zero2": curve_gap(z2, res, skip)},
        "resumed_from": metrics["resume"].get("resumed_from"),
        "killed_run_rc": rc_kill,
        "optimizer_shards_in_checkpoint": shards,
        "mlflow_child_runs": len(runs),
        "mlflow_child_runs_expected": 4,
        "history": {"ref": ref, "zero2": z2, "resume": res},
    }
    checks = {
        f"{n} ranks trained (world size in the metrics)": metrics["zero2"].get("world_size") == n,
        f"{n} optimizer shards": len(shards) == n,
        "resumed mid-run from a ZeRO checkpoint": 0 < (metrics["resume"].get("resumed_from") or 0) < args.steps,
        "one MLflow run per invocation (rank 0 only)": len(runs) == 4,
        "curves match within noise (<5% mean rel gap)": report["loss_curve_gap_rel"]["zero2_vs_ref"] < 0.05,
        "resumed curve continues (<5%)": report["loss_curve_gap_rel"]["resume_vs_zero2"] < 0.05,
    }
    report["checks"] = checks
    path = envelope.write(Path(args.results_dir) / "zero2_scaling.json", report)
    if os.environ.get("OUT"):
        shutil.copy(path, os.environ["OUT"])
        for log in work.glob("*.log"):
            shutil.copy(log, os.environ["OUT"])

    print(f"\n{'run':<10}{'procs':>6}{'wall s':>9}{'final loss':>12}{'tokens/s/GPU':>15}")
    for key, procs, tok in (("ref", 1, tok_1), ("zero2", n, tok_n / n), ("resume", n, float("nan"))):
        print(f"{key:<10}{procs:>6}{logs.get(key + '_s', logs.get('resumed_s', 0)):>9.1f}"
              f"{metrics[key].get('final_loss') or float('nan'):>12.4f}{tok:>15.0f}")
    print(f"loss-curve gap {n}-proc vs 1-proc: {report['loss_curve_gap_rel']['zero2_vs_ref']:.4f}; "
          f"resumed vs uninterrupted: {report['loss_curve_gap_rel']['resume_vs_zero2']:.4f}; "
          f"resumed_from={metrics['resume'].get('resumed_from')}; shards={shards}; MLflow child runs={len(runs)}")
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAIL'}] {name}")
    print(f"wrote {path}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
