"""The filler language: sentences of a tiny English-like grammar, the haystack of NIAH and the perplexity set.

A sentence is ``NP VP .`` with ``NP = DET [ADJ] NOUN`` and ``VP = VERB NP [PREP NP | ADV]``; words of
each category are drawn Zipf-distributed. The language has a low, fixed entropy rate, so a tiny LM can
learn it and its perplexity is meaningful. Its words never include needle keys, digits or the
needle/question wording.
"""
from __future__ import annotations

import bisect
import math
from itertools import accumulate
from typing import Callable

import numpy as np

from ..errors import ConfigError
from .rows import IGNORE_INDEX, row

WORD_POOL: dict[str, tuple[str, ...]] = {
    "det": ("the", "a", "every", "some", "this", "that", "each", "no"),
    "noun": (
        "dog", "cat", "bird", "fish", "horse", "cow", "sheep", "goat", "fox", "wolf", "bear", "deer", "mouse",
        "frog", "duck", "owl", "hen", "pig", "rabbit", "lion", "tiger", "whale", "snake", "bee", "ant",
        "farmer", "baker", "child", "teacher", "doctor", "sailor", "king", "queen", "girl", "boy", "man",
        "woman", "friend", "neighbor", "stranger", "river", "lake", "hill", "forest", "field", "garden",
        "road", "bridge", "house", "village", "town", "city", "market", "school", "tower", "castle", "boat",
        "cart", "wagon", "stone", "tree", "flower", "leaf", "apple", "bread", "cake", "cheese", "milk",
        "window", "door", "table", "chair", "book", "letter", "song", "story", "lamp", "basket", "coat", "hat",
        "shoe", "cup", "ring", "drum", "rope", "bell", "nest", "wheel"),
    "verb": (
        "sees", "finds", "takes", "holds", "carries", "follows", "watches", "likes", "wants", "needs", "keeps",
        "moves", "pulls", "pushes", "paints", "builds", "draws", "buys", "sells", "brings", "visits", "opens",
        "closes", "cleans", "helps", "meets", "chases", "feeds", "calls", "reads", "writes", "hears", "loves",
        "hides", "fixes", "lifts", "drops", "throws", "catches", "leaves"),
    "adj": (
        "old", "young", "big", "small", "red", "green", "blue", "yellow", "brown", "white", "black", "tall",
        "short", "quiet", "loud", "happy", "sad", "quick", "slow", "warm", "cold", "bright", "dark", "soft",
        "hard", "wet", "dry", "clean", "heavy", "light", "sweet", "bitter", "round", "tiny", "huge", "kind",
        "gentle", "brave", "clever", "proud"),
    "adv": ("slowly", "quickly", "quietly", "often", "never", "always", "gladly", "softly", "early", "late",
            "again", "together"),
    "prep": ("near", "under", "over", "behind", "beside", "with", "from", "into", "across", "along", "inside",
             "around"),
}
POOL_SIZE = sum(len(words) for words in WORD_POOL.values())
P_ADJECTIVE = 0.5
P_PREPOSITION_PHRASE = 0.4
P_ADVERB = 0.2


def _allocate(vocab_size: int) -> dict[str, int]:
    """Words per category: proportional to the pool, at least one each, summing to ``vocab_size``."""
    if not len(WORD_POOL) <= vocab_size <= POOL_SIZE:
        raise ConfigError(f"data.filler.vocab_size: expected {len(WORD_POOL)}..{POOL_SIZE}, got {vocab_size}")
    counts = {cat: max(1, round(len(words) * vocab_size / POOL_SIZE)) for cat, words in WORD_POOL.items()}
    while sum(counts.values()) != vocab_size:
        if sum(counts.values()) < vocab_size:
            cat = max(counts, key=lambda c: len(WORD_POOL[c]) - counts[c])
            counts[cat] += 1
        else:
            counts[max(counts, key=counts.get)] -= 1
    return counts


class FillerLanguage:
    """A sampler of filler sentences over ``vocab_size`` words (fixed grammar, Zipf word choice)."""

    def __init__(self, vocab_size: int):
        self.words = {cat: WORD_POOL[cat][:n] for cat, n in _allocate(vocab_size).items()}
        self.cumulative = {cat: list(accumulate(_zipf(len(words))))[:-1] for cat, words in self.words.items()}

    @property
    def vocabulary(self) -> list[str]:
        return [w for words in self.words.values() for w in words]

    def _pick(self, cat: str, rng: np.random.Generator) -> str:
        return self.words[cat][bisect.bisect(self.cumulative[cat], rng.random())]

    def _noun_phrase(self, rng: np.random.Generator) -> list[str]:
        phrase = [self._pick("det", rng)]
        if rng.random() < P_ADJECTIVE:
            phrase.append(self._pick("adj", rng))
        return phrase + [self._pick("noun", rng)]

    def sentence(self, rng: np.random.Generator) -> list[str]:
        """One sentence as whitespace-separated words, the last carrying the full stop."""
        words = self._noun_phrase(rng) + [self._pick("verb", rng)] + self._noun_phrase(rng)
        tail = rng.random()
        if tail < P_PREPOSITION_PHRASE:
            words += [self._pick("prep", rng)] + self._noun_phrase(rng)
        elif tail < P_PREPOSITION_PHRASE + P_ADVERB:
            words.append(self._pick("adv", rng))
        words[-1] += "."
        return words

    def words_per_sentence(self) -> dict[str, float]:
        """Expected number of words of each category in one sentence."""
        noun_phrases = 2 + P_PREPOSITION_PHRASE
        return {"det": noun_phrases, "adj": P_ADJECTIVE * noun_phrases, "noun": noun_phrases, "verb": 1.0,
                "adv": P_ADVERB, "prep": P_PREPOSITION_PHRASE}

    def entropy_per_sentence(self) -> float:
        """Entropy of one sentence in nats: grammar branches plus Zipf word choices.

        The categories are disjoint, so the words determine the derivation and this is also the entropy of
        the sentence's text.
        """
        branches = (2 + P_PREPOSITION_PHRASE) * _entropy([P_ADJECTIVE, 1 - P_ADJECTIVE])
        branches += _entropy([P_PREPOSITION_PHRASE, P_ADVERB, 1 - P_PREPOSITION_PHRASE - P_ADVERB])
        return branches + sum(n * _entropy(_zipf(len(self.words[cat])))
                              for cat, n in self.words_per_sentence().items())

    def perplexity_floor(self, tokens_of: Callable[[str], int]) -> float:
        """The perplexity of the true model per token: exp(sentence entropy / expected tokens per sentence).

        ``tokens_of(word)`` counts a word's tokens; the full stop is one more token per sentence.
        """
        tokens = 1.0 + sum(n * sum(p * tokens_of(w) for p, w in zip(_zipf(len(self.words[cat])), self.words[cat]))
                           for cat, n in self.words_per_sentence().items())
        return math.exp(self.entropy_per_sentence() / tokens)


def generate_filler(count: int, seq_len: int, language: FillerLanguage, encoder,
                    rng: np.random.Generator) -> list[dict]:
    """``count`` passages of exactly ``seq_len`` tokens (bos first, cut mid-sentence); every token after bos
    is supervised."""
    rows = []
    for _ in range(count):
        ids: list[int] = []
        while len(ids) < seq_len - 1:
            ids += encoder.ids(language.sentence(rng))
        ids = ids[: seq_len - 1]
        rows.append(row("filler", [encoder.bos, *ids], [IGNORE_INDEX, *ids], length=seq_len))
    return rows


def _entropy(probs) -> float:
    return -sum(p * math.log(p) for p in probs if p > 0)


def _zipf(n: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, n + 1)
    return weights / weights.sum()
