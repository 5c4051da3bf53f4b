"""Assemble the synthetic text dataset: tokenizer, then every task's train and test rows, deterministic by seed.

Each (task, split, setting) draws from its own generator seeded by ``(data.seed, stream)``, so changing
one task's config never changes another task's rows.
"""
from __future__ import annotations

import zlib

import numpy as np

from ..config.data import DataConfig
from .arithmetic import arithmetic_words, generate_arithmetic
from .digit_copy import generate_digit_copies
from .filler import FillerLanguage, generate_filler
from .lists import generate_lists, item_words, list_words
from .mqar import generate_mqar, mqar_vocabulary
from .niah import generate_niah, niah_words
from .niah_text import generate_niah_text
from .rows import COLUMNS
from .text_rows import text_test_rows, text_train_rows
from .tokenizer import UNK, WordEncoder, build_tokenizer, word_level_tokenizer
from .walk import generate_walks, walk_words


def vocabulary_words(cfg: DataConfig) -> list[str]:
    """Every word any generator can emit, in a fixed order (the tokenizer's vocabulary order)."""
    keys, values = mqar_vocabulary(cfg.mqar.num_keys, cfg.mqar.num_values)
    filler = FillerLanguage(cfg.filler.vocab_size).vocabulary
    return list(dict.fromkeys([*filler, *niah_words(), *arithmetic_words(), *keys, *values,
                               *walk_words(cfg.walk.vocab_size), *list_words(cfg.lists.vocab_size)]))


def filler_perplexity_floor(cfg: DataConfig, tokenizer) -> float:
    """Per-token perplexity of the true filler model under ``tokenizer``: what a perfect LM reaches."""
    encoder = WordEncoder(tokenizer)
    return FillerLanguage(cfg.filler.vocab_size).perplexity_floor(lambda word: len(encoder.word(word)))


def longest_answer_tokens(cfg: DataConfig, tokenizer=None) -> dict[str, int]:
    """Tokens of the longest gold answer each task family generated up to ``eval.max_new_tokens`` can have under
    ``tokenizer`` (default: the project's ``data.tokenizer``), from the config alone. The list families are not among
    them, nor the walks: each generates as many tokens as its own answer and eos (:mod:`relin.eval.tasks`).

    NIAH answers are ``value_digits``-digit values (multi-query: all ``num_keys`` of them, joined by
    ``", "``); an arithmetic answer is at most ``max_operand * (max(steps) + 1)`` (every step adds).
    Digits and punctuation are in every tokenizer's vocabulary, so no words are needed to count them.
    """
    # Answers are digits and punctuation, one token each in the word tokenizer as in the project's digit-split BPE
    # (which the config alone cannot build): the word tokenizer counts them before the BPE exists.
    proxy = "word" if cfg.tokenizer == "bpe" else cfg.tokenizer
    count = _word_count(word_level_tokenizer(proxy, [])) if tokenizer is None else _encoder_count(tokenizer)
    value = "9" * cfg.niah.value_digits
    niah = {"single": value, "multikey": value, "multiquery": ", ".join([value] * cfg.niah.num_keys), "text": value}
    answers = {f"niah_{family}": niah[family] for family in cfg.niah.families} if "niah" in cfg.tasks else {}
    if "arithmetic" in cfg.tasks:
        answers["arithmetic"] = str(cfg.arithmetic.max_operand * (max(cfg.arithmetic.steps) + 1))
    return {task: count(answer) for task, answer in answers.items()}


def _encoder_count(tokenizer):
    encoder = WordEncoder(tokenizer)
    return lambda text: len(encoder.ids(text))


def _word_count(core):
    """Tokens of a text under the project's word-level ``core`` (``tokenizers.Tokenizer``), as :class:`WordEncoder`
    counts them under the ``build_tokenizer`` that wraps it: word by word, without bos (a Metaspace tokenizer marks
    each word's boundary itself, so no prefix)."""
    unk = core.token_to_id(UNK)

    def count(text: str) -> int:
        ids = [i for word in text.split(" ") for i in core.encode(word, add_special_tokens=False).ids]
        if unk in ids:
            raise ValueError(f"{text!r}: outside the tokenizer's vocabulary")
        return len(ids)
    return count


def _rng(seed: int, *stream: object) -> np.random.Generator:
    tag = zlib.crc32("/".join(map(str, stream)).encode())
    return np.random.default_rng([seed, tag])


def generate_rows(cfg: DataConfig, tokenizer, texts: dict[str, list[str]] | None = None) -> dict[str, list[dict]]:
    """All rows per split ("train", "test"); with ``texts`` (the real-text corpus's files per split), its rows too
    (:mod:`relin.data.text_rows`)."""
    encoder = WordEncoder(tokenizer)
    language = FillerLanguage(cfg.filler.vocab_size)
    keys, values = mqar_vocabulary(cfg.mqar.num_keys, cfg.mqar.num_values)
    splits: dict[str, list[dict]] = {"train": [], "test": []}
    tasks = set(cfg.tasks)
    for split in splits if "mqar" in tasks else ():
        for i, setting in enumerate(getattr(cfg.mqar, split)):
            splits[split] += generate_mqar(setting, keys, values, cfg.mqar.power_a, encoder,
                                           _rng(cfg.seed, "mqar", split, i))
    niah = cfg.niah
    for family in niah.families if "niah" in tasks else ():
        if family == "text":
            splits["test"] += generate_niah_text((texts or {}).get("test", []), niah.lengths, niah.depths,
                                                 niah.test_examples_per_depth, niah.value_digits, tokenizer, encoder,
                                                 _rng(cfg.seed, "niah", family, "test"), niah.text_idiom)
            continue
        rng = _rng(cfg.seed, "niah", family, "train")
        for i in range(niah.train_examples):
            length = niah.train_lengths[i % len(niah.train_lengths)]
            splits["train"] += generate_niah(family, length, [None], niah.value_digits, niah.num_keys,
                                             language, encoder, rng, "data.niah.train_lengths")
        for length in niah.lengths:
            depths = [d for d in niah.depths for _ in range(niah.test_examples_per_depth)]
            splits["test"] += generate_niah(family, length, depths, niah.value_digits, niah.num_keys,
                                            language, encoder, _rng(cfg.seed, "niah", family, "test", length))
    arith = cfg.arithmetic
    for split, count in (("train", arith.train_examples), ("test", arith.test_examples)) if "arithmetic" in tasks \
            else ():
        splits[split] += generate_arithmetic(count, arith.steps, arith.max_operand, encoder,
                                             _rng(cfg.seed, "arithmetic", split))
    walks = cfg.walk
    for split, count in (("train", walks.train_examples), ("test", walks.test_examples)) if "walk" in tasks else ():
        splits[split] += generate_walks(count, walks.items, walks.max_stride, item_words(walks.vocab_size), split,
                                        encoder, _rng(cfg.seed, "walk", split), walks.held_out_every)
    lists = cfg.lists
    for op in lists.ops if "lists" in tasks else ():
        for split, count, fewest in (("train", lists.train_examples, lists.min_items),
                                     ("test", lists.test_examples, lists.items)):
            splits[split] += generate_lists(op, count, fewest, lists.items, item_words(lists.vocab_size), encoder,
                                            _rng(cfg.seed, "lists", op, split))
    copies = cfg.digit_copy
    for split, count in (("train", copies.train_examples), ("test", copies.test_examples)) \
            if "digit_copy" in tasks else ():
        splits[split] += generate_digit_copies(count, copies.digits, tokenizer, encoder,
                                               _rng(cfg.seed, "digit_copy", split))
    for split, count in (("train", cfg.filler.train_examples), ("test", cfg.filler.test_examples)) \
            if "filler" in tasks else ():
        splits[split] += generate_filler(count, cfg.filler.seq_len, language, encoder,
                                         _rng(cfg.seed, "filler", split))
    if texts is not None and cfg.text.train_examples and "text" in tasks:
        splits["train"] += text_train_rows(texts["train"], tokenizer, encoder.bos, encoder.eos, cfg.text)
        splits["test"] += text_test_rows(texts["test"], tokenizer, encoder.bos, cfg.text)
    return splits


def build_synth_text(cfg: DataConfig, tokenizer=None, bpe=None, texts: dict[str, list[str]] | None = None):
    """``(DatasetDict, tokenizer)``; the train split is shuffled (by seed), test keeps task order.

    ``tokenizer`` renders the tasks with a checkpoint's own tokenizer (a pretrained teacher's); by default the
    project's ``data.tokenizer`` is built over the generators' words (for teachers trained in the DAG), for ``bpe``
    from the BPE folder ``bpe``. ``texts``: the real-text corpus's files per split, rendered as ``text`` rows."""
    import pyarrow as pa
    from datasets import Dataset, DatasetDict

    if tokenizer is None:
        tokenizer = build_tokenizer(cfg.tokenizer, vocabulary_words(cfg), bpe)
    schema = pa.schema([
        ("task", pa.string()), ("input_ids", pa.list_(pa.int32())), ("labels", pa.list_(pa.int32())),
        ("prompt_len", pa.int32()), ("answer", pa.string()), ("answers", pa.list_(pa.string())),
        ("length", pa.int32()), ("depth", pa.float32()), ("num_pairs", pa.int32()),
        ("needle_distance", pa.int32())])
    splits = generate_rows(cfg, tokenizer, texts)
    order = _rng(cfg.seed, "shuffle").permutation(len(splits["train"]))
    splits["train"] = [splits["train"][i] for i in order]
    data = DatasetDict({name: Dataset(pa.Table.from_pydict({c: [r[c] for r in rows] for c in COLUMNS}, schema))
                        for name, rows in splits.items()})
    return data, tokenizer
