"""``relin bpe-tokenizer --corpus DIR --out DIR``: a byte-level BPE learnt on the real-text train split, and the
corpus packed in it.

Reads a ``relin real-text`` folder. Writes ``DIR/`` (``save_to_disk``: splits train, validation, test of packed
rows, columns ``task`` = ``"corpus"``, ``input_ids`` [``bpe.seq_len``]: the ``text-corpus`` layout, which the
training stages read as :class:`~relin.stages._training.TextData`), ``DIR/tokenizer/`` (the BPE as a
``PreTrainedTokenizerFast``: what ``relin synth-text --tokenizer DIR/tokenizer`` renders the synthetic tasks with)
and ``DIR/stats.json`` (vocabulary, training time, rows, tokens and bytes per token per split, and the add-one
unigram perplexity of the validation and test tokens under train's counts), atomically.
"""
from __future__ import annotations

import argparse

from ..config.real_text import BpeConfig

EXPECTED = "expected a real_text corpus saved by relin real-text"


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"bpe": BpeConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="the relin real-text folder (e.g. results/data/real_text)")
    parser.add_argument("--out", required=True, help="output directory (e.g. results/data/bpe)")


def read_corpus(path: str) -> dict:
    """The corpus's splits as in-memory ``Dataset`` objects of ``path``, ``text``, ``bytes``.

    In memory because ``Dataset.map`` on a dataset read from disk writes its cache files into that folder: the
    output of another stage, which would then no longer be what that stage wrote."""
    from datasets import Dataset

    from ..data.documents import SPLITS
    from ..data.loaders import load_split

    return {s: Dataset(load_split(path, s, ("path", "text", "bytes"), EXPECTED).data.table.combine_chunks())
            for s in SPLITS}


def build(corpus: dict, cfg: BpeConfig):
    """``(DatasetDict of packed rows, tokenizer, stats)`` from the corpus splits."""
    import time

    from datasets import DatasetDict

    from ..data.bpe import iter_texts, token_stream, train_bpe, unigram_perplexity
    from ..data.corpus import pack_documents
    from ..errors import InputError

    start = time.perf_counter()
    tokenizer = train_bpe(iter_texts(corpus["train"]), cfg)
    train_s = time.perf_counter() - start
    rows, splits = {}, {}
    for split, docs in corpus.items():
        rows[split] = pack_documents(docs, tokenizer, "text", cfg.seq_len)
        if not len(rows[split]):
            raise InputError(f"bpe: the corpus's {split} split fills no row of {cfg.seq_len} tokens (expected a "
                             f"larger real_text.max_bytes or a smaller bpe.seq_len)")
        tokens, size = len(rows[split]) * cfg.seq_len, sum(docs["bytes"])
        splits[split] = {"files": len(docs), "bytes": size, "rows": len(rows[split]), "tokens": tokens,
                         "bytes_per_token": round(size / tokens, 4)}
    train = token_stream(rows["train"]["input_ids"])
    baseline = {split: round(unigram_perplexity(train, token_stream(rows[split]["input_ids"]), len(tokenizer)), 3)
                for split in ("validation", "test")}
    stats = {"vocab_size": len(tokenizer), "seq_len": cfg.seq_len, "train_s": round(train_s, 2), "splits": splits,
             "unigram_perplexity": baseline}
    return DatasetDict(rows), tokenizer, stats


def run(args: argparse.Namespace, sections) -> None:
    from datasets.utils.logging import disable_progress_bar

    from ..config.loader import as_dict
    from ..io import atomic_dir, atomic_write_json
    from ..tracking import stage_run

    cfg = sections.get("bpe")
    disable_progress_bar()
    corpus = read_corpus(args.corpus)
    with stage_run("bpe-tokenizer", {"bpe": as_dict(cfg)}, inputs=[args.corpus], outputs=[args.out]) as tracker:
        data, tokenizer, stats = build(corpus, cfg)
        tracker.record({"train_s": stats["train_s"]})
        with atomic_dir(args.out) as tmp:
            data.save_to_disk(str(tmp))
            tokenizer.save_pretrained(str(tmp / "tokenizer"))
            atomic_write_json(tmp / "stats.json", stats)
        tracker.log_metrics({"vocab_size": stats["vocab_size"], "train_s": stats["train_s"],
                             **{f"{s}_tokens": e["tokens"] for s, e in stats["splits"].items()},
                             **{f"{s}_unigram_perplexity": p for s, p in stats["unigram_perplexity"].items()}})
    tokens = ", ".join(f"{s} {e['tokens']}" for s, e in stats["splits"].items())
    print(f"bpe-tokenizer: {stats['vocab_size']} tokens learnt in {stats['train_s']} s; tokens {tokens}; unigram "
          f"perplexity on test {stats['unigram_perplexity']['test']} -> {args.out}")
