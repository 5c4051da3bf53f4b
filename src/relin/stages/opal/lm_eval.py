"""``relin opal-lm-eval --model DIR --name NAME``: the paper's benchmarks (GSM8K, MATH-500, commonsense) on one
causal LM through lm-evaluation-harness's Hugging Face model class (:mod:`relin.eval.harness`).

Writes ``--out`` (JSON): per task its metrics (e.g. ``exact_match``, ``acc``, ``acc_norm``), the examples scored
and the few-shot count, with the model's name. The DAG runs it only when ``opal.lm_eval.tasks`` names tasks.
"""
from __future__ import annotations

import argparse

from ...config.opal import LMEvalConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"opal.lm_eval": LMEvalConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="causal LM directory (save_pretrained, with its tokenizer)")
    parser.add_argument("--name", required=True, help="the model's name in the results and report")
    parser.add_argument("--out", required=True, help="results JSON to write")


def run(args: argparse.Namespace, sections) -> None:
    import sys

    from ... import tracking
    from ...config.loader import as_dict
    from ...data.tokenizer import load_tokenizer
    from ...devices import compute_device
    from ...errors import ConfigError
    from ...eval.harness import harness_lm, run_tasks
    from ...io import atomic_write_json
    from ...models.saved import load_saved

    cfg = sections.get("opal.lm_eval")
    if not cfg.tasks:
        raise ConfigError("opal.lm_eval.tasks: empty; expected lm-evaluation-harness task names")
    model = load_saved(args.model).eval().to(compute_device())
    tokenizer = load_tokenizer(args.model)
    with tracking.stage_run("opal-lm-eval", {"opal.lm_eval": as_dict(cfg), "name": args.name}, inputs=[args.model],
                            outputs=[args.out]) as tracker:
        tracker.set_tags({"relin.model_name": args.name})
        summary = run_tasks(harness_lm(model, tokenizer, cfg.batch_size, cfg.max_length), cfg.tasks,
                            cfg.include_path, cfg.num_fewshot, cfg.limit)
        atomic_write_json(args.out, {"name": args.name, **summary})
        tracker.log_metrics({f"{task}/{metric}": value for task, scores in summary["results"].items()
                             for metric, value in scores.items()})
    shown = "; ".join(f"{task} " + ", ".join(f"{m} {v:.4f}" for m, v in scores.items())
                      for task, scores in summary["results"].items())
    print(f"lm-eval {args.name}: {shown}", file=sys.stderr)
