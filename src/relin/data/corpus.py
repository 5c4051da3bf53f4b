"""A text corpus from local files -> packed token rows in a checkpoint's tokenizer (the ``corpus`` section).

Documents are read with Hugging Face ``datasets`` (``json`` for JSON lines, ``parquet``), tokenized in
batches, each followed by the tokenizer's eos, concatenated and cut into rows of ``seq_len`` tokens (a
trailing remainder shorter than a row is dropped). The last ``test_rows`` rows form the test split. Every
step is an Arrow ``map``: nothing holds the corpus in Python lists.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..config.corpus import FORMATS, CorpusConfig
from ..errors import InputError
from .loaders import _first_line

if TYPE_CHECKING:
    from datasets import DatasetDict

TASK = "corpus"


def read_documents(cfg: CorpusConfig):
    """The documents of ``cfg.files`` as one ``Dataset`` with the ``text_field`` column, checked."""
    from datasets import load_dataset

    if not cfg.files:
        raise InputError("corpus.files: empty (expected local .jsonl or .parquet files)")
    for name in cfg.files:
        if not Path(name).is_file():
            raise InputError(f"corpus file {name}: not found (expected a local JSON-lines or parquet file)")
    kind = FORMATS["." + cfg.files[0].rsplit(".", 1)[-1].lower()]
    try:
        docs = load_dataset(kind, data_files=[str(Path(f).resolve()) for f in cfg.files], split="train")
    except Exception as err:  # noqa: BLE001 - pyarrow and json raise many types for damaged files
        raise InputError(f"corpus files {', '.join(cfg.files)}: unreadable as {kind} ({_first_line(err)})") from None
    if cfg.text_field not in docs.column_names:
        raise InputError(f"corpus files {', '.join(cfg.files)}: no {cfg.text_field!r} column (found "
                         f"{', '.join(docs.column_names)}; set corpus.text_field)")
    return docs


def pack_documents(docs, tokenizer, text_field: str, seq_len: int, max_tokens: int = 0):
    """Rows ``{"task": "corpus", "input_ids": [seq_len]}`` of the documents in ``docs`` (a ``Dataset`` with a
    ``text_field`` column), in order: each tokenized without special tokens and followed by the tokenizer's eos,
    the stream cut into rows of ``seq_len`` (a trailing remainder shorter than a row dropped), stopping once
    ``max_tokens`` (0: no limit) are packed."""
    if tokenizer.eos_token_id is None:
        raise InputError("corpus: the tokenizer has no eos token to separate documents")
    eos, size = tokenizer.eos_token_id, seq_len

    def tokenize(batch):
        ids = tokenizer([t or "" for t in batch[text_field]], add_special_tokens=False)["input_ids"]
        return {"ids": [row + [eos] for row in ids]}

    tokens = docs.map(tokenize, batched=True, remove_columns=docs.column_names, desc="tokenize")
    if max_tokens:  # the documents that reach max_tokens, so that no more than needed is packed
        import numpy as np

        lengths = tokens.map(lambda b: {"n": [len(r) for r in b["ids"]]}, batched=True, desc="count")["n"]
        reach = int(np.searchsorted(np.cumsum(np.asarray(lengths)), max_tokens)) + 1
        tokens = tokens.select(range(min(reach, len(tokens))))

    carry: list[int] = []

    def pack(batch):
        stream = carry + [t for row in batch["ids"] for t in row]
        cut = len(stream) // size * size
        carry[:] = stream[cut:]
        rows = [stream[i:i + size] for i in range(0, cut, size)]
        return {"task": [TASK] * len(rows), "input_ids": rows}

    # One process and in order: the carry joins a batch's tail to the next batch's head.
    rows = tokens.map(pack, batched=True, batch_size=1000, remove_columns=["ids"], desc="pack")
    if max_tokens:
        rows = rows.select(range(min(len(rows), max(1, max_tokens // size))))
    return rows


def build_corpus(cfg: CorpusConfig, tokenizer) -> "DatasetDict":
    """Rows ``{"task": "corpus", "input_ids": [seq_len]}`` in splits train and test."""
    from datasets import DatasetDict

    rows = pack_documents(read_documents(cfg), tokenizer, cfg.text_field, cfg.seq_len, cfg.max_tokens)
    if len(rows) <= cfg.test_rows:
        raise InputError(f"corpus: {len(rows)} rows of {cfg.seq_len} tokens, not more than corpus.test_rows="
                         f"{cfg.test_rows} (expected more text, a smaller corpus.seq_len or fewer test rows)")
    split = len(rows) - cfg.test_rows
    return DatasetDict({"train": rows.select(range(split)).flatten_indices(),
                        "test": rows.select(range(split, len(rows))).flatten_indices()})
