"""The project's own tokenizer: word level with single-digit numbers, or char level.

Both kinds mark a word boundary with ``▁`` (Metaspace), so text made of space-separated words encodes
word by word: the ids of ``"a b"`` are the ids of ``"a"`` followed by those of ``"b"``. The generators
rely on this to build examples from cached per-word ids (:class:`WordEncoder`), and decoding restores
the text exactly. Word level isolates punctuation and splits numbers into single digits (``"1234,"`` ->
``▁ 1 2 3 4 ,``) so a model can copy numbers digit by digit with a vocabulary of a few hundred tokens.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ..errors import ConfigError, InputError

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)
BOUNDARY = "\u2581"
DIGITS = "0123456789"
PUNCTUATION = ".,:?"


def build_tokenizer(kind: str, words: Iterable[str], bpe: str | Path | None = None):
    """A ``PreTrainedTokenizerFast`` covering ``words`` (plus digits and ``.,:?``); bos is prepended.

    Args:
        kind (str): ``"word"`` (one token per word, one per digit), ``"char"`` (one per character) or ``"bpe"``
            (the byte-level BPE saved at ``bpe``, learnt on the real-text corpus, with every word of ``words`` added
            as one token, so the synthetic rows keep a token per word).
        words (Iterable[str]): the words the generators emit, without punctuation or digits.
        bpe: the BPE's ``save_pretrained`` folder (``relin bpe-tokenizer``'s ``tokenizer/``), for ``"bpe"``.
    """
    from transformers import PreTrainedTokenizerFast

    if kind == "bpe":
        return _bpe_with_words(bpe, words)
    return PreTrainedTokenizerFast(tokenizer_object=word_level_tokenizer(kind, words), bos_token=BOS,
                                   eos_token=EOS, pad_token=PAD, unk_token=UNK, model_max_length=1 << 16)


def word_level_tokenizer(kind: str, words: Iterable[str]):
    """The ``tokenizers.Tokenizer`` that :func:`build_tokenizer` wraps for ``kind`` ``"word"`` or ``"char"``; built
    with the ``tokenizers`` library alone, so that a caller that only counts tokens (the Snakefile's pre-flight
    check) does not import transformers and torch."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS)}
    if kind == "word":
        symbols = [BOUNDARY, *DIGITS, *PUNCTUATION] + [BOUNDARY + w for w in dict.fromkeys(words)]
        pre = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(prepend_scheme="always", split=True),
                                       pre_tokenizers.Punctuation("isolated"),
                                       pre_tokenizers.Digits(individual_digits=True)])
        split = True
    elif kind == "char":
        symbols = [BOUNDARY, *DIGITS, *PUNCTUATION] + sorted({c for w in words for c in w})
        pre = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(prepend_scheme="always", split=False),
                                       pre_tokenizers.Split(Regex("."), "isolated")])
        split = False
    else:
        raise ConfigError(f"data.tokenizer: expected 'bpe', 'word' or 'char', got {kind!r}")
    for symbol in symbols:
        vocab.setdefault(symbol, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    core.pre_tokenizer = pre
    core.decoder = decoders.Metaspace(prepend_scheme="always", split=split)
    core.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])])
    return core


def _bpe_with_words(bpe: str | Path | None, words: Iterable[str]):
    """The BPE at ``bpe`` with each word added as one token, matched with its leading space (a byte-level BPE's word
    prefix); an added token is matched before the BPE splits the text, so a row's ids stay its words' ids joined."""
    from tokenizers import AddedToken

    if bpe is None:
        raise ConfigError("data.tokenizer: bpe renders the tasks with the BPE learnt on the real-text corpus "
                          "(expected relin synth-text --bpe DIR, DIR the tokenizer/ of relin bpe-tokenizer)")
    tokenizer = load_tokenizer(bpe)
    prefix = word_prefix(tokenizer)
    tokenizer.add_tokens([AddedToken(prefix + word, normalized=False) for word in dict.fromkeys(words)])
    word_prefix(tokenizer)  # the added words keep a text's ids its words' ids joined, or this says which broke it
    return tokenizer


class WordEncoder:
    """Per-word ids with a cache: ``ids(text)`` equals the tokenizer's ids of ``text`` without bos.

    Works for the project's tokenizers and a checkpoint's alike. A Metaspace tokenizer (ours, SentencePiece)
    marks every word's boundary itself, so a word's ids do not depend on its neighbours. A byte-level BPE
    (Qwen, GPT-NeoX/Pythia) attaches the space to the word after it: there every word is encoded with its
    leading space (``prefix``), and the rendered text is `` w1 w2 ...``. A checkpoint without a bos token
    (Qwen) starts each row with its eos, GPT-2's convention.
    """

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.eos = tokenizer.eos_token_id
        self.bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else self.eos
        if self.eos is None:
            raise InputError(f"tokenizer {tokenizer.name_or_path or type(tokenizer).__name__}: has no eos token "
                             f"(expected one to end every task row)")
        self.unk = tokenizer.unk_token_id
        self.prefix = word_prefix(tokenizer)
        self._cache: dict[str, list[int]] = {}

    def word(self, word: str) -> list[int]:
        ids = self._cache.get(word)
        if ids is None:
            ids = self.tokenizer(self.prefix + word, add_special_tokens=False)["input_ids"]
            if self.unk is not None and self.unk in ids:
                raise ValueError(f"word {word!r} is outside the tokenizer's vocabulary")
            self._cache[word] = ids
        return ids

    def ids(self, text: str | list[str]) -> list[int]:
        """Ids of space-separated words (a string, or a list of words)."""
        words = text.split(" ") if isinstance(text, str) else text
        return [i for w in words for i in self.word(w)]


_PROBE = ("the", "cat", "7", "sat.", "key", "12", "is", "value:")


def word_prefix(tokenizer) -> str:
    """What to put before each word so that a text's ids are the concatenation of its words' ids: ``""``
    for a tokenizer that marks word boundaries itself (Metaspace), ``" "`` for a byte-level BPE.

    Raises :class:`InputError` when neither holds (the generators could not build rows word by word)."""
    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    for prefix in ("", " "):
        if encode(prefix + " ".join(_PROBE)) == [i for word in _PROBE for i in encode(prefix + word)]:
            return prefix
    raise InputError(f"tokenizer {tokenizer.name_or_path or type(tokenizer).__name__}: a text's ids are not its "
                     f"words' ids joined, with or without a leading space (expected a Metaspace/SentencePiece or "
                     f"byte-level BPE tokenizer)")


def check_same_tokenizer(data_tokenizer, data_path: str | Path, model: str | Path) -> None:
    """Raise :class:`InputError` (one line) unless the tokenizer saved with ``model`` is the one that tokenized
    the dataset at ``data_path``: the same vocabulary, token for token. Ids of another tokenizer would reach the
    model as other tokens (e.g. the word tokenizer's few hundred ids fed to a BPE checkpoint)."""
    from ..hub import resolve

    saved = resolve(str(model), "model")
    if not (saved / "tokenizer.json").is_file() and not (saved / "tokenizer_config.json").is_file():
        raise InputError(f"model {model}: saved without its tokenizer (expected tokenizer.json beside config.json), "
                         f"so its ids cannot be checked against those of data {data_path}")
    model_tokenizer = load_tokenizer(saved)
    if model_tokenizer.get_vocab() == data_tokenizer.get_vocab():
        return
    raise InputError(f"model {model}: its tokenizer ({type(model_tokenizer).__name__}, {len(model_tokenizer)} tokens) "
                     f"is not the one data {data_path} was tokenized with ({type(data_tokenizer).__name__}, "
                     f"{len(data_tokenizer)} tokens); its ids would reach the model as other tokens: expected a "
                     f"model trained on this data, or data tokenized by the model's tokenizer")


def _saved_class(path: Path) -> str | None:
    """``tokenizer_class`` of a saved tokenizer's ``tokenizer_config.json`` (None when absent or unreadable)."""
    import json

    try:
        return json.loads((path / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None


def load_tokenizer(path: str | Path) -> "PreTrainedTokenizerBase":
    """A tokenizer saved with ``save_pretrained`` (the project's, or a checkpoint's), or a Hugging Face id's in the
    local cache; it must have a pad token."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from ..hub import resolve

    path = resolve(str(path), "tokenizer")
    if not (path / "tokenizer.json").is_file() and not (path / "tokenizer_config.json").is_file():
        raise InputError(f"tokenizer {path}: not a save_pretrained tokenizer directory "
                         f"(expected tokenizer.json)")
    # A tokenizer saved beside a model's config.json would be rebuilt by AutoTokenizer as that model type's
    # class (qwen2 -> Qwen2Tokenizer, byte-level), which drops the project's word pre-tokenizer: every word
    # vanishes. A tokenizer saved as the generic backend is therefore loaded as exactly that.
    generic = _saved_class(path) in ("TokenizersBackend", "PreTrainedTokenizerFast")
    try:
        if generic:
            tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path), local_files_only=True)
        else:
            tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - json, tokenizers and OS errors all mean a damaged file
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise InputError(f"tokenizer {path}: unreadable, a file is damaged ({first}); regenerate it "
                         f"(the stage that wrote it, e.g. relin synth-text)") from None
    if tokenizer.pad_token_id is None:
        if tokenizer.eos_token_id is None:
            raise InputError(f"tokenizer {path}: has neither a pad nor an eos token (expected a pad token)")
        # Checkpoints such as Pythia ship without a pad token; padded positions are masked, so eos serves.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer
