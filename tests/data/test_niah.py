import numpy as np
import pytest

from relin.data.filler import FillerLanguage
from relin.data.niah import ANSWER_PREFIX_ONE, NEEDLE, QUESTION_ONE, generate_niah, string_match_all
from relin.data.rows import IGNORE_INDEX
from relin.data.synth_text import vocabulary_words
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.errors import ConfigError


@pytest.fixture(scope="module")
def setup(small_config):
    cfg = small_config()
    tokenizer = build_tokenizer("word", vocabulary_words(cfg))
    return tokenizer, WordEncoder(tokenizer), FillerLanguage(cfg.filler.vocab_size)


def _find(ids: list[int], needle: list[int]) -> int:
    starts = [i for i in range(len(ids) - len(needle) + 1) if ids[i:i + len(needle)] == needle]
    assert len(starts) == 1, f"needle found {len(starts)} times"
    return starts[0]


@pytest.mark.parametrize("length", [128, 256, 400])
def test_single_needle_at_requested_depth_and_exact_length(setup, seed, length):
    tokenizer, encoder, language = setup
    depths = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0]
    rows = generate_niah("single", length, depths, 4, 4, language, encoder, np.random.default_rng(seed))
    longest_sentence = 40
    for depth, row in zip(depths, rows):
        ids = row["input_ids"]
        assert len(ids) == length == row["length"] and row["depth"] == depth
        assert ids[0] == tokenizer.bos_token_id and ids[-1] == tokenizer.eos_token_id
        (value,) = row["answers"]
        key = tokenizer.decode(ids).split(" numbers for ")[1].split(" ")[0]
        needle = encoder.ids(NEEDLE.format(key=key, value=value))
        start = _find(ids, needle)
        tail = encoder.ids(QUESTION_ONE.format(key=key) + " " + ANSWER_PREFIX_ONE.format(key=key))
        assert ids[row["prompt_len"] - len(tail):row["prompt_len"]] == tail
        haystack = row["prompt_len"] - 1 - len(needle) - len(tail)
        assert row["needle_distance"] == row["prompt_len"] - (start + len(needle))
        assert abs((start - 1) - depth * haystack) <= longest_sentence / 2 + 1
        answer_ids = encoder.ids(value) + [tokenizer.eos_token_id]
        assert ids[row["prompt_len"]:] == answer_ids
        assert row["labels"] == [IGNORE_INDEX] * row["prompt_len"] + answer_ids


def test_needle_distance_is_that_of_the_nearest_queried_needle(setup, seed):
    tokenizer, encoder, language = setup
    rng = np.random.default_rng(seed)
    for family in ("multikey", "multiquery"):
        for row in generate_niah(family, 256, [None] * 5, 4, 4, language, encoder, rng):
            ids = row["input_ids"]
            text = tokenizer.decode(ids[:row["prompt_len"]], skip_special_tokens=True)
            ends = {}
            for key, value in (part.split(" is: ") for part in text.split("one of the special magic numbers for ")[1:]):
                needle = encoder.ids(NEEDLE.format(key=key, value=value.split(".")[0]))
                ends[value.split(".")[0]] = _find(ids, needle) + len(needle)
            assert len(ends) == 4 and row["needle_distance"] == min(row["prompt_len"] - ends[v] for v in row["answers"])


def test_multikey_has_distractors_and_multiquery_asks_every_key(setup, seed):
    tokenizer, encoder, language = setup
    rng = np.random.default_rng(seed)
    for row in generate_niah("multikey", 256, [0.5] * 5, 4, 4, language, encoder, rng):
        text = tokenizer.decode(row["input_ids"][:row["prompt_len"]], skip_special_tokens=True)
        assert text.count("one of the special magic numbers for") == 4
        (value,) = row["answers"]
        assert f"is: {value}." in text and row["answer"] == value
    for row in generate_niah("multiquery", 256, [None] * 5, 4, 4, language, encoder, rng):
        text = tokenizer.decode(row["input_ids"], skip_special_tokens=True)
        assert text.count("one of the special magic numbers for") == 4 and len(set(row["answers"])) == 4
        assert row["answer"] == ", ".join(row["answers"]) and text.endswith("are: " + row["answer"])
        for value in row["answers"]:
            assert f"is: {value}." in text
        assert 0.0 <= row["depth"] <= 1.0


def test_too_short_length_names_the_key(setup, seed):
    _, encoder, language = setup
    with pytest.raises(ConfigError, match=r"^data.niah.train_lengths: 40 tokens cannot hold"):
        generate_niah("multiquery", 40, [0.5], 4, 4, language, encoder, np.random.default_rng(seed),
                      "data.niah.train_lengths")


def test_string_match_all_known_cases():
    assert string_match_all(["The number is 1234."], [["1234"]]) == 100.0
    assert string_match_all(["nothing here"], [["1234"]]) == 0.0
    assert string_match_all(["1234, 99"], [["1234", "5678"]]) == 50.0
    assert string_match_all(["ALPHA and 7"], [["alpha", "7", "8", "9"]]) == 50.0
    assert string_match_all(["1, 2, 3", "x"], [["1", "2", "3"], ["y"]]) == 50.0
    with pytest.raises(ValueError, match="2 predictions for 1 answer lists"):
        string_match_all(["a", "b"], [["a"]])
