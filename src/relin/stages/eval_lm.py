"""``relin eval-lm``: perplexity and task accuracy of one causal LM on the ``synth_text`` test split.

Writes ``metrics.json`` (perplexity, accuracy per task family, their mean, accuracy by length, n, chance
levels), ``accuracy_by_length.csv`` (task, length, depth, accuracy, n) and ``items.csv`` (one row per
evaluated example, for the report's intervals). Any causal LM directory loads
(teachers now, hybrid students later); ``--name`` labels it in the report.
"""
from __future__ import annotations

import argparse

from ..config.eval import EvalConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"eval": EvalConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="causal LM directory (save_pretrained)")
    parser.add_argument("--data", required=True, help="synth_text dataset directory (with tokenizer/)")
    parser.add_argument("--name", required=True, help="the model's name in metrics and report")
    parser.add_argument("--out", required=True, help="metrics.json to write")
    parser.add_argument("--by-length", required=True, help="accuracy_by_length.csv to write")
    parser.add_argument("--items", required=True, help="items.csv to write (per-example scores)")


def _flat_metrics(metrics: dict) -> dict[str, float]:
    flat = {"overall": metrics["overall"], "perplexity": metrics["perplexity"]}
    flat.update({f"accuracy/{task}": acc for task, acc in metrics["accuracy"].items()})
    for task, by_length in metrics["accuracy_by_length"].items():
        flat.update({f"accuracy/{task}/len{length}": acc for length, acc in by_length.items()})
    return {k: v for k, v in flat.items() if v is not None}


def autocast(precision: str, model):
    """bf16 autocast on the model's device for ``precision`` bf16; nothing for fp32."""
    import contextlib

    import torch

    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(next(model.parameters()).device.type, dtype=torch.bfloat16)


def run(args: argparse.Namespace, sections) -> None:
    import sys

    from .. import tracking
    from ..artifacts import BY_LENGTH_COLUMNS, ITEM_COLUMNS
    from ..config.loader import as_dict
    from ..data.tokenizer import check_same_tokenizer, load_tokenizer
    from ..devices import compute_device
    from ..errors import InputError
    from ..eval.data import load_eval_split, tokenizer_dir
    from ..eval.lm import evaluate_lm
    from ..io import atomic_write_csv, atomic_write_json
    from ..models.saved import load_saved

    cfg = sections.get("eval")
    rows = load_eval_split(args.data)
    tokenizer = load_tokenizer(tokenizer_dir(args.data))
    check_same_tokenizer(tokenizer, args.data, args.model)
    model = load_saved(args.model).eval().to(compute_device())
    if model.config.vocab_size < len(tokenizer):
        raise InputError(f"model {args.model}: vocabulary of {model.config.vocab_size} tokens is smaller than "
                         f"the data tokenizer's {len(tokenizer)} (expected a model trained on {args.data})")
    with tracking.stage_run("eval-lm", {"eval": as_dict(cfg), "name": args.name},
                            inputs=[args.model, args.data],
                            outputs=[args.out, args.by_length, args.items]) as tracker:
        tracker.set_tags({"relin.model_name": args.name})
        with autocast(cfg.precision, model):
            result = evaluate_lm(model, rows, tokenizer, cfg, name=args.name)
        metrics = result.metrics()
        atomic_write_json(args.out, metrics)
        atomic_write_csv(args.by_length, result.by_length_rows(), list(BY_LENGTH_COLUMNS))
        atomic_write_csv(args.items, result.item_rows(), list(ITEM_COLUMNS))
        tracker.log_metrics({**_flat_metrics(metrics), **{f"seconds/{k}": v for k, v in result.seconds.items()}})
        tracker.log_artifact(args.out)
        tracker.log_artifact(args.by_length)
        tracker.log_artifact(args.items)
    scores = [f"perplexity {metrics['perplexity']:.3f}" if metrics["perplexity"] is not None else "no perplexity"]
    scores += [f"{task} {acc:.3f}" for task, acc in metrics["accuracy"].items()]
    print(f"eval-lm {args.name}: {', '.join(scores)} ({sum(result.seconds.values()):.1f} s)", file=sys.stderr)
