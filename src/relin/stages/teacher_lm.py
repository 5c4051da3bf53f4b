"""``relin teacher-lm``: build one teacher from its model config and train it on the synthetic text
tasks (all task families mixed, next-token cross-entropy on the labelled tokens), or resolve a
pretrained checkpoint when the model config names one.

Outputs (rank 0 only, each written atomically, deterministic for the same inputs, code and
machine): the model directory (``save_pretrained``, safetensors, plus the tokenizer),
``history.csv`` (one row per logged step) and ``train_metrics.json``. Wall time, throughput and the
step a run resumed from go to MLflow and the outputs' manifests, not into the outputs.

Checkpoints go under ``--checkpoints``, in a directory keyed by the run's config, data digest and
code (:func:`~relin.train.checkpoint.run_identity`); rerunning the same command after a kill resumes
from the newest readable one, and a finished run removes them. Launch with ``torchrun``/``deepspeed``
for several processes.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..config.teacher import TeacherModelConfig
from ..config.train import TrainConfig
from ..errors import InputError


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {f"teacher.models.{args.arch}": TeacherModelConfig, "teacher.train": TrainConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", required=True, help="key of teacher.models (e.g. qwen3, gpt_neox)")
    parser.add_argument("--data", required=True, help="synth-text dataset directory (save_to_disk + tokenizer/)")
    parser.add_argument("--out", required=True, help="model directory to write (save_pretrained)")
    parser.add_argument("--history", required=True, help="per-step training history CSV to write")
    parser.add_argument("--metrics", required=True, help="final training metrics JSON to write")
    parser.add_argument("--checkpoints", required=True, help="checkpoint root (resumed from when present)")


# Per-step columns that measure the machine, not the model: logged to MLflow, kept out of history.csv.
TIMING_COLUMNS = ("tokens_per_s", "elapsed_s")


def history_columns(rows: list[dict]) -> list[str]:
    """Every non-timing key the history rows carry, in first-seen order (the default header when empty)."""
    keys = dict.fromkeys(key for row in rows for key in row if key not in TIMING_COLUMNS)
    return list(keys) or ["step", "loss", "lr", "grad_norm"]


def load_train_rows(data: Path):
    from ..data.loaders import load_split

    train = load_split(data, "train", ("task", "input_ids", "labels"))
    return list(train["task"]), list(train["input_ids"]), list(train["labels"])


def run(args: argparse.Namespace, sections) -> None:
    import torch

    from ..io import atomic_dir, atomic_write_csv, atomic_write_json
    from ..models.teachers import build_teacher, load_pretrained, load_tokenizer
    from ..tracking import stage_run
    from ..train.batching import StepBatches
    from ..train.checkpoint import release, run_directory, run_identity
    from ..train.distributed import barrier, dist_env
    from ..train.loop import train
    from ..train.objectives import build_objective

    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    model_cfg = sections.get(f"teacher.models.{args.arch}")
    train_cfg = sections.get("teacher.train")
    env = dist_env()
    data = Path(args.data)
    outputs = [args.out, args.history, args.metrics] if env.is_main else []

    with stage_run("teacher-lm", sections.raw, inputs=[data] if env.is_main else [], outputs=outputs) as tracker:
        tracker.set_tags({"relin.arch": args.arch})
        if model_cfg.pretrained:
            from transformers import AutoTokenizer

            allow_network = os.environ.get("HF_HUB_OFFLINE", "0") != "1"
            model = load_pretrained(model_cfg.pretrained, allow_network=allow_network)
            tokenizer = AutoTokenizer.from_pretrained(model_cfg.pretrained, trust_remote_code=False,
                                                      local_files_only=not allow_network)
            history, summary = [], {"steps": 0, "pretrained": model_cfg.pretrained}
        else:
            tasks, input_ids, labels = load_train_rows(data)
            tokenizer = load_tokenizer(data / "tokenizer")
            longest = max(len(r) for r in input_ids)
            if longest > model_cfg.max_position_embeddings:
                raise InputError(f"--data {data}: rows of {longest} tokens exceed teacher.models.{args.arch}"
                                 f".max_position_embeddings={model_cfg.max_position_embeddings}")
            model = build_teacher(model_cfg, tokenizer, seed=train_cfg.seed)
            tracker.log_params({"num_parameters": sum(p.numel() for p in model.parameters())})
            batches = StepBatches(input_ids, labels, batch_size=train_cfg.batch_size,
                                  pad_id=tokenizer.pad_token_id, seed=train_cfg.seed,
                                  curriculum=train_cfg.curriculum, tasks=tasks,
                                  task_weights=train_cfg.task_weights, bucket_by_length=train_cfg.bucket_by_length,
                                  rank=env.rank, world_size=env.world_size)
            run_dir = run_directory(args.checkpoints, run_identity(sections.raw, [data], __name__), env)
            result = train(model, build_objective("ce"), batches, train_cfg,
                           checkpoint_root=run_dir, tracker=tracker, env=env)
            model, history = result.model, result.history
            tracker.record({"wall_s": round(result.wall_s, 2), "resumed_from": result.resumed_from})
            summary = {"steps": result.steps, "final_loss": result.final_loss, "world_size": env.world_size,
                       "backend": train_cfg.backend,
                       "final_accuracy": history[-1].get("accuracy") if history else None}
        if env.is_main:
            model = model.to("cpu", torch.float32)
            with atomic_dir(args.out) as tmp:
                model.save_pretrained(tmp, safe_serialization=True)
                tokenizer.save_pretrained(tmp)
            columns = history_columns(history)
            atomic_write_csv(args.history, [{k: row.get(k) for k in columns} for row in history], columns)
            atomic_write_json(args.metrics, summary)
            tracker.log_metrics({k: v for k, v in summary.items() if isinstance(v, (int, float))})
        if not model_cfg.pretrained:
            release(run_dir, env)
    barrier()
