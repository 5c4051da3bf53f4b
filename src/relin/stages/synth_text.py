"""``relin synth-text --out DIR``: the synthetic text tasks as a HF ``DatasetDict`` plus the tokenizer.

Writes ``DIR/`` (``save_to_disk``: splits train, test), ``DIR/tokenizer/`` (the project's
``PreTrainedTokenizerFast``, or with ``--tokenizer`` the checkpoint's, saved as it loads)
and ``DIR/stats.json`` (rows and longest example per split and task, the filler language's
perplexity floor), atomically. The same config gives the same bytes; the generation time goes to
MLflow and the manifest beside ``DIR``.
"""
from __future__ import annotations

import argparse

from ..config.data import DataConfig


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {"data": DataConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory (e.g. results/data/synth_text)")
    parser.add_argument("--tokenizer", default="",
                        help="render the tasks with this checkpoint's tokenizer (Hugging Face id or saved directory; "
                             "a pretrained teacher's) instead of the project's data.tokenizer")


def dataset_stats(data) -> dict:
    """Rows and longest ``input_ids`` per split and task."""
    stats: dict = {}
    for split, ds in data.items():
        per_task: dict[str, dict] = {}
        for task, length in zip(ds["task"], map(len, ds["input_ids"])):
            entry = per_task.setdefault(task, {"rows": 0, "max_len": 0})
            entry["rows"] += 1
            entry["max_len"] = max(entry["max_len"], length)
        stats[split] = {"rows": len(ds), "max_len": max(e["max_len"] for e in per_task.values()),
                        "tasks": per_task}
    return stats


def run(args: argparse.Namespace, sections) -> None:
    import time

    from datasets.utils.logging import disable_progress_bar

    from ..config.loader import as_dict
    from ..data.synth_text import build_synth_text, filler_perplexity_floor
    from ..data.tokenizer import load_tokenizer
    from ..io import atomic_dir, atomic_write_json
    from ..tracking import stage_run

    cfg = sections.get("data")
    disable_progress_bar()
    checkpoint = load_tokenizer(args.tokenizer) if args.tokenizer else None
    params = {"data": as_dict(cfg), "tokenizer": args.tokenizer or cfg.tokenizer}
    with stage_run("synth-text", params, outputs=[args.out]) as tracker:
        start = time.perf_counter()
        data, tokenizer = build_synth_text(cfg, checkpoint)
        seconds = time.perf_counter() - start
        stats = {**dataset_stats(data), "vocab_size": len(tokenizer),
                 "filler_perplexity_floor": round(filler_perplexity_floor(cfg, tokenizer), 4)}
        tracker.record({"generation_s": round(seconds, 2)})
        with atomic_dir(args.out) as tmp:
            data.save_to_disk(str(tmp))
            tokenizer.save_pretrained(str(tmp / "tokenizer"))
            atomic_write_json(tmp / "stats.json", stats)
        tracker.log_metrics({"vocab_size": len(tokenizer),
                             "filler_perplexity_floor": stats["filler_perplexity_floor"],
                             **{f"{split}_rows": stats[split]["rows"] for split in data},
                             **{f"{split}_max_len": stats[split]["max_len"] for split in data}})
        splits = ", ".join(f"{s} {stats[s]['rows']} rows (max {stats[s]['max_len']} tokens)" for s in data)
        print(f"synth-text: {splits}, vocab {len(tokenizer)}, {seconds:.1f} s -> {args.out}")
