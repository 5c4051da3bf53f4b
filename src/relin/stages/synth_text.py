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


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"data": DataConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory (e.g. results/data/synth_text)")
    parser.add_argument("--tokenizer", default="",
                        help="render the tasks with this checkpoint's tokenizer (Hugging Face id or saved directory; "
                             "a pretrained teacher's) instead of the project's data.tokenizer")
    parser.add_argument("--bpe", default="", help="data.tokenizer bpe: the BPE's folder (relin bpe-tokenizer's "
                                                 "tokenizer/), to which the task words are added")
    parser.add_argument("--real-text", default="", help="the real-text corpus (relin real-text's folder), rendered "
                                                       "as text rows (data.text); none: no text rows")


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


def text_baseline(data, vocab_size: int) -> dict:
    """The add-one unigram perplexity of the test text rows under the train rows' counts: the bar a model of the
    real-text language must clear (none without text rows)."""
    from ..data.bpe import token_stream, unigram_perplexity
    from ..data.text_rows import TASK

    streams = {split: token_stream(ids[1:] for task, ids in zip(ds["task"], ds["input_ids"]) if task == TASK)
               for split, ds in data.items()}
    if not streams["test"].size or not streams["train"].size:
        return {}
    return {"text_unigram_perplexity": round(unigram_perplexity(streams["train"], streams["test"], vocab_size), 3)}


def read_texts(path: str) -> dict[str, list[str]]:
    """The real-text corpus's files per split (train and test), in the corpus's order."""
    from ..data.loaders import load_split

    expected = "expected a real-text corpus saved by relin real-text"
    return {split: list(load_split(path, split, ("text",), expected)["text"]) for split in ("train", "test")}


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
    texts = read_texts(args.real_text) if args.real_text else None
    params = {"data": as_dict(cfg), "tokenizer": args.tokenizer or cfg.tokenizer}
    inputs = [p for p in (args.bpe, args.real_text) if p]
    with stage_run("synth-text", params, inputs=inputs, outputs=[args.out]) as tracker:
        start = time.perf_counter()
        data, tokenizer = build_synth_text(cfg, checkpoint, args.bpe or None, texts)
        seconds = time.perf_counter() - start
        stats = {**dataset_stats(data), "vocab_size": len(tokenizer),
                 "filler_perplexity_floor": round(filler_perplexity_floor(cfg, tokenizer), 4),
                 **text_baseline(data, len(tokenizer))}
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
