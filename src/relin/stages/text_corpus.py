"""``relin text-corpus --tokenizer ID --out DIR``: the ``corpus`` section's files as packed token rows.

Writes ``DIR/`` (``save_to_disk``: splits train, test; columns ``task``, ``input_ids``), ``DIR/tokenizer/``
(the checkpoint's, as it loads) and ``DIR/stats.json`` (rows, tokens, documents), atomically. The
distillation stages read it like a ``synth_text`` dataset (:class:`~relin.stages._training.TextData`): every
token is a target, and a row's first half is an on-policy prompt.
"""
from __future__ import annotations

import argparse

from ..config.corpus import CorpusConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"corpus": CorpusConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokenizer", required=True,
                        help="the teacher's tokenizer: a Hugging Face id (local cache) or a saved directory")
    parser.add_argument("--out", required=True, help="output directory (e.g. results/data/corpus-qwen3)")


def run(args: argparse.Namespace, sections) -> None:
    from ..config.loader import as_dict
    from ..data.corpus import build_corpus
    from ..data.tokenizer import load_tokenizer
    from ..io import atomic_dir, atomic_write_json
    from ..tracking import stage_run

    cfg = sections.get("corpus")
    tokenizer = load_tokenizer(args.tokenizer)
    with stage_run("text-corpus", {"corpus": as_dict(cfg), "tokenizer": args.tokenizer},
                   outputs=[args.out]) as tracker:
        data = build_corpus(cfg, tokenizer)
        stats = {split: {"rows": len(ds), "tokens": len(ds) * cfg.seq_len} for split, ds in data.items()}
        with atomic_dir(args.out) as tmp:
            data.save_to_disk(str(tmp))
            tokenizer.save_pretrained(str(tmp / "tokenizer"))
            atomic_write_json(tmp / "stats.json", {**stats, "seq_len": cfg.seq_len, "files": cfg.files})
        tracker.log_metrics({f"{split}_{k}": v for split, entry in stats.items() for k, v in entry.items()})
        print(f"text-corpus: {stats['train']['rows']} training rows, {stats['test']['rows']} test rows of "
              f"{cfg.seq_len} tokens -> {args.out}")
