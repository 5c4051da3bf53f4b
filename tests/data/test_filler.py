import math

import numpy as np
import pytest

from relin.data.filler import WORD_POOL, FillerLanguage, generate_filler
from relin.data.niah import NEEDLE_KEYS
from relin.data.synth_text import vocabulary_words
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.errors import ConfigError


def test_categories_are_disjoint_and_never_contain_needle_words():
    words = [w for cat in WORD_POOL.values() for w in cat]
    assert len(words) == len(set(words)) == 200
    assert not set(words) & (set(NEEDLE_KEYS) | {"special", "magic", "number", "numbers", "answer"})


@pytest.mark.parametrize("vocab_size", [6, 8, 37, 199, 200])
def test_vocabulary_has_the_requested_size(vocab_size):
    language = FillerLanguage(vocab_size)
    assert len(set(language.vocabulary)) == vocab_size and all(language.words.values())


def test_vocab_size_out_of_range_is_a_config_error():
    with pytest.raises(ConfigError, match="data.filler.vocab_size"):
        FillerLanguage(201)


def test_perplexity_floor_of_a_one_word_per_category_language(seed):
    language = FillerLanguage(6)
    entropy = (2 + 0.4) * math.log(2) - (0.4 * math.log(0.4) + 0.2 * math.log(0.2) + 0.4 * math.log(0.4))
    assert language.entropy_per_sentence() == pytest.approx(entropy)
    assert language.perplexity_floor(lambda word: 1) == pytest.approx(math.exp(entropy / 8.6))
    rng = np.random.default_rng(seed)
    words = np.mean([len(language.sentence(rng)) for _ in range(4000)])
    assert words + 1 == pytest.approx(8.6, abs=0.1)


def test_passages_have_exact_length_and_decode_to_grammatical_words(seed, small_config):
    tokenizer = build_tokenizer("word", vocabulary_words(small_config()))
    language = FillerLanguage(small_config().filler.vocab_size)
    rows = generate_filler(20, 100, language, WordEncoder(tokenizer), np.random.default_rng(seed))
    allowed = set(language.vocabulary) | {"."}
    for row in rows:
        assert len(row["input_ids"]) == 100 and row["labels"][1:] == row["input_ids"][1:]
        text = tokenizer.decode(row["input_ids"], skip_special_tokens=True)
        assert set(text.replace(".", " .").split()) <= allowed
