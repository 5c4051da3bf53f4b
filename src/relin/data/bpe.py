"""A byte-level BPE trained on the real-text corpus, the corpus packed in it, and the unigram baseline.

The tokenizer is GPT-2's construction in Hugging Face ``tokenizers``: text as bytes mapped to 256 printable
symbols (the ``ByteLevel`` pre-tokenizer, GPT-2's regex splitting words with their leading space), merges learnt
by ``BpeTrainer``, and the ``ByteLevel`` decoder, so that ``decode(encode(text)) == text`` for every string and no
token is unknown. Optionally every digit is its own pre-token (as in Llama's and Qwen's tokenizers).

It is saved as a ``PreTrainedTokenizerFast`` with ``<pad>``, ``<bos>``, ``<eos>`` (ids 0, 1, 2), bos prepended
when special tokens are added (as the project's own tokenizer), and ``split_special_tokens``: the corpus is Python
source that may spell ``"<eos>"`` (lm_eval's ``utils.py`` does), which must stay text and never become the id
that separates documents. The synthetic tasks render with it (``relin synth-text --tokenizer DIR``): a text's ids
are its words' ids, each word with its leading space (:func:`relin.data.tokenizer.word_prefix`).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable, Iterator

import numpy as np

from ..config.real_text import BpeConfig
from .tokenizer import BOS, EOS, PAD

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

BPE_SPECIAL_TOKENS = (PAD, BOS, EOS)


def train_bpe(texts: Iterable[str], cfg: BpeConfig) -> "PreTrainedTokenizerFast":
    """A byte-level BPE of ``cfg.vocab_size`` tokens learnt from ``texts`` (documents, in order).

    The trainer's result depends on the texts and the config alone: pair counts are exact and ties between
    equally frequent pairs break by the pair itself, not by thread timing (a test trains twice)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    core.pre_tokenizer = (pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
                          if cfg.split_digits else byte_level)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=cfg.vocab_size, min_frequency=cfg.min_frequency,
                                  special_tokens=list(BPE_SPECIAL_TOKENS), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(texts, trainer=trainer)
    bos = core.token_to_id(BOS)
    core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, bos)])
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   model_max_length=1 << 20, clean_up_tokenization_spaces=False,
                                   split_special_tokens=True)


def token_stream(rows: Iterable[list[int]]) -> np.ndarray:
    """The ids of packed rows, concatenated: ``[rows * seq_len]`` int64."""
    chunks = [np.asarray(r, dtype=np.int64) for r in rows]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)


def unigram_perplexity(train: np.ndarray, test: np.ndarray, vocab_size: int) -> float:
    """Perplexity on ``test`` of the token unigram counted on ``train``, add-one smoothed over ``vocab_size`` ids:
    ``p(t) = (count(t) + 1) / (N + V)``; the baseline any model that uses context must beat."""
    counts = np.bincount(train, minlength=vocab_size).astype(np.float64)
    log_p = np.log(counts + 1.0) - math.log(train.size + vocab_size)
    return float(np.exp(-log_p[test].mean()))


def iter_texts(docs, batch_size: int = 256) -> Iterator[str]:
    """The ``text`` column of a ``Dataset`` in order, a batch at a time (no list of the whole corpus)."""
    for start in range(0, len(docs), batch_size):
        yield from docs[start:start + batch_size]["text"]
