"""The ``data`` section: the synthetic text tasks (``synth_text``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .loader import ConfigError, option


@dataclass(kw_only=True)
class MQARSetting:
    """One multi-query associative-recall setting (Zoology): sequence length and key-value pairs."""

    seq_len: int = option(help="tokens per example including bos (word tokenizer; words for char)", minimum=5)
    num_pairs: int = option(help="key-value pairs per example", minimum=1)
    examples: int = option(help="number of examples", minimum=1)

    def validate(self, prefix: str) -> None:
        if 4 * self.num_pairs > self.seq_len - 1:
            raise ConfigError(f"{prefix}.seq_len: expected >= 4 * num_pairs + 1 = {4 * self.num_pairs + 1} "
                              f"(pairs, then one query and its value per pair), got {self.seq_len}")


@dataclass(kw_only=True)
class MQARConfig:
    """Multi-query associative recall (Zoology's MQAR)."""

    num_keys: int = option(64, "distinct key tokens", minimum=2)
    num_values: int = option(64, "distinct value tokens", minimum=2)
    power_a: float = option(0.01, "power-law exponent of query gaps (Zoology)", exclusive_minimum=0)
    train: list[MQARSetting] = option(default_factory=lambda: [
        MQARSetting(seq_len=64, num_pairs=8, examples=4000)], help="training settings")
    test: list[MQARSetting] = option(default_factory=lambda: [
        MQARSetting(seq_len=64, num_pairs=8, examples=200)], help="test settings")

    def validate(self, prefix: str) -> None:
        for split in ("train", "test"):
            for i, setting in enumerate(getattr(self, split)):
                if setting.num_pairs > min(self.num_keys, self.num_values):
                    raise ConfigError(f"{prefix}.{split}[{i}].num_pairs: expected <= min(num_keys, num_values) = "
                                      f"{min(self.num_keys, self.num_values)} (keys and values are distinct), "
                                      f"got {setting.num_pairs}")


@dataclass(kw_only=True)
class NIAHConfig:
    """Needle-in-a-haystack in the three RULER families (single needle, multi-key, multi-query), and ``text``: one
    needle in the held-out real-text files, asked for in their own idiom, with no train rows (zero-shot for every
    model: :mod:`relin.data.niah_text`)."""

    families: list[Literal["single", "multikey", "multiquery", "text"]] = option(
        ["single", "multikey", "multiquery"], "NIAH families to generate: the RULER ones, and text (a needle in the "
        "held-out real-text files, test rows only)")
    lengths: list[int] = option([128, 256, 512], "test context lengths in tokens (may exceed training)")
    train_lengths: list[int] = option([128, 256], "training context lengths in tokens (examples cycle through them)")
    depths: list[float] = option([0.0, 0.25, 0.5, 0.75, 1.0], "test needle depths as fractions of the haystack")
    value_digits: int = option(4, "digits of each needle value (RULER uses 7)", minimum=1)
    text_idiom: Literal["assignment", "passkey"] = option(
        "assignment", "how the text family hides and asks for its needle (relin.data.niah_text.IDIOMS): an assignment "
                      "line in Python source, or the passkey prompt in prose")
    num_keys: int = option(4, "needles in multi-key (1 queried) / keys queried in multi-query", minimum=2, maximum=16)
    train_examples: int = option(3000, "training examples per family", minimum=0)
    test_examples_per_depth: int = option(10, "test examples per (family, length, depth)", minimum=1)

    def validate(self, prefix: str) -> None:
        for name in ("lengths", "train_lengths"):
            for i, length in enumerate(getattr(self, name)):
                if length < 16:
                    raise ConfigError(f"{prefix}.{name}[{i}]: expected a context length >= 16 tokens, got {length}")
        for i, depth in enumerate(self.depths):
            if not 0.0 <= depth <= 1.0:
                raise ConfigError(f"{prefix}.depths[{i}]: expected a fraction in [0, 1], got {depth}")
        if not self.families:
            raise ConfigError(f"{prefix}.families: expected at least one of single, multikey, multiquery, text")


@dataclass(kw_only=True)
class ArithmeticConfig:
    """Multi-step arithmetic word problems with a checkable final answer."""

    steps: list[int] = option([1, 2], "numbers of operations per problem (each example draws one)")
    max_operand: int = option(20, "largest operand", minimum=1)
    train_examples: int = option(3000, "training examples", minimum=0)
    test_examples: int = option(200, "test examples", minimum=1)

    def validate(self, prefix: str) -> None:
        if not self.steps or min(self.steps) < 1:
            raise ConfigError(f"{prefix}.steps: expected a non-empty list of integers >= 1, got {self.steps}")


@dataclass(kw_only=True)
class WalkConfig:
    """Walks on a cycle of item words (task ``walk``): a start item, then steps of a stride the prompt gives; long
    answers, every token checkable, scored by greedy generation and exact match (OPAL's Table 3 family)."""

    items: int = option(48, "items of every walk, the start included: each answer is this many tokens and eos",
                        minimum=1)
    vocab_size: int = option(64, "items on the cycle", minimum=2)
    max_stride: int = option(8, "largest stride (strides 1..max_stride)", minimum=1)
    held_out_every: int = option(8, "one (start, stride) pair in this many is held out for the test walks (every "
                                    "stride's cycle keeps training starts)", minimum=2)
    train_examples: int = option(4000, "training walks (start and stride pairs apart from the test ones)", minimum=0)
    test_examples: int = option(50, "test walks: distinct held-out pairs, at most vocab_size x max_stride / "
                                    "held_out_every", minimum=1)

    def validate(self, prefix: str) -> None:
        from ..data.walk_split import test_pairs

        if self.max_stride >= self.vocab_size:
            raise ConfigError(f"{prefix}.max_stride: expected < vocab_size ({self.vocab_size}), got "
                              f"{self.max_stride}")
        available = len(test_pairs(self.vocab_size, self.max_stride, self.held_out_every))
        if self.test_examples > available:
            raise ConfigError(f"{prefix}.test_examples: {self.test_examples} distinct test walks asked, the held-out "
                              f"(start, stride) pairs number {available} (raise vocab_size, max_stride or lower "
                              f"held_out_every)")


@dataclass(kw_only=True)
class ListsConfig:
    """Lists written out, then copied or reversed (task ``list_<op>``): long answers, every token checkable, scored by
    greedy generation and exact match. None by default (a named variant lists the operations)."""

    ops: list[Literal["copy", "reverse"]] = option([], "operations, one task each (list_copy: the items as written; "
                                                       "list_reverse: last first); none: no list rows")
    items: int = option(48, "items of every test list: each held-out answer is this many tokens and eos", minimum=1)
    min_items: int = option(4, "fewest items of a training list (training lists hold min_items..items)", minimum=1)
    vocab_size: int = option(64, "distinct item words (a list draws its items without replacement)", minimum=2)
    train_examples: int = option(4000, "training examples per operation", minimum=0)
    test_examples: int = option(50, "test examples per operation", minimum=1)

    def validate(self, prefix: str) -> None:
        if self.min_items > self.items:
            raise ConfigError(f"{prefix}.min_items: expected <= items ({self.items}), got {self.min_items}")
        if self.items > self.vocab_size:
            raise ConfigError(f"{prefix}.items: {self.items} distinct items need vocab_size >= {self.items}, got "
                              f"{self.vocab_size}")
        if len(set(self.ops)) != len(self.ops):
            raise ConfigError(f"{prefix}.ops: expected distinct operations, got {self.ops}")


@dataclass(kw_only=True)
class DigitCopyConfig:
    """A long number written out, then again (task ``digit_copy``): long answers a pretrained LM copies zero-shot,
    every token checkable (OPAL's Table 3 family on a checkpoint teacher)."""

    digits: int = option(48, "digits of every number: each answer is this many tokens after its space", minimum=1)
    train_examples: int = option(2000, "training rows (for the dataset-traces control)", minimum=0)
    test_examples: int = option(128, "test rows", minimum=1)


@dataclass(kw_only=True)
class FillerConfig:
    """Filler 'language' for haystacks and perplexity: a small word grammar."""

    vocab_size: int = option(200, "filler words (at most the 200 of the built-in word pool)", minimum=8, maximum=200)
    train_examples: int = option(2000, "training passages", minimum=0)
    test_examples: int = option(100, "held-out passages for perplexity", minimum=1)
    seq_len: int = option(128, "tokens per passage including bos", minimum=8)


@dataclass(kw_only=True)
class TextConfig:
    """Rows of a real-text corpus beside the synthetic tasks, task ``text``: the language the teachers learn, and the
    held-out files every perplexity is measured on, by position. The corpus is ``real_text`` (a pinned release's Python
    files) or ``prose`` (State of the Union addresses and Moby-Dick, from pinned npm tarballs)."""

    corpus: Literal["real_text", "prose"] = option(
        "real_text", "the corpus the text rows, the text NIAH haystacks and the project's BPE are made from: "
                     "real_text (Python files) or prose (English prose); its folder is results/data/<corpus>")
    train_lengths: list[int] = option([128, 512], "tokens per training row (bos included), cut in turn from the "
                                                  "train files joined by eos: the short rows for length-curriculum "
                                                  "stages (OPAL's 2A), the long ones beside them (2B)")
    train_examples: int = option(0, "training rows (fewer when the train split runs out); 0: no text rows (the "
                                    "word and char tokenizers cannot read text)", minimum=0)
    test_files: int = option(48, "held-out test files, one row each, scored for perplexity", minimum=1)
    test_len: int = option(512, "tokens of each test file kept (bos included): positions 257+ need more than 256",
                           minimum=16)

    def validate(self, prefix: str) -> None:
        if not self.train_lengths or min(self.train_lengths) < 8:
            raise ConfigError(f"{prefix}.train_lengths: expected a non-empty list of lengths >= 8, got "
                              f"{self.train_lengths}")


TASK_FAMILIES = ("mqar", "niah", "arithmetic", "walk", "lists", "filler", "text", "digit_copy")


@dataclass(kw_only=True)
class DataConfig:
    """Synthetic text tasks (``synth_text``), deterministic by seed, saved as a HF dataset."""

    seed: int = option(0, "data seed")
    tasks: list[Literal[TASK_FAMILIES]] = option(
        ["mqar", "niah", "arithmetic", "walk", "lists", "filler", "text"],
        "the families rendered (each's own section sets its rows); a pretrained teacher's overlay keeps the ones it "
        "masters zero-shot")
    tokenizer: Literal["bpe", "word", "char"] = option(
        "word", "the project's tokenizer: the byte-level BPE learnt on the real-text corpus (bpe; the DAG's default) "
                "with every task word added as one token, or a word- or char-level one over the task words alone")
    mqar: MQARConfig = option(default_factory=MQARConfig, help="multi-query associative recall")
    niah: NIAHConfig = option(default_factory=NIAHConfig, help="needle in a haystack (RULER families)")
    arithmetic: ArithmeticConfig = option(default_factory=ArithmeticConfig, help="arithmetic word problems")
    walk: WalkConfig = option(default_factory=WalkConfig, help="walks on a cycle of items (long exact answers)")
    lists: ListsConfig = option(default_factory=ListsConfig, help="lists copied or reversed (long exact answers)")
    filler: FillerConfig = option(default_factory=FillerConfig, help="filler language")
    digit_copy: DigitCopyConfig = option(default_factory=DigitCopyConfig, help="long numbers copied (long exact "
                                                                                 "answers; data.tasks digit_copy)")
    text: TextConfig = option(default_factory=TextConfig, help="real-text rows (tokenizer bpe)")
