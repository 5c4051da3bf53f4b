"""The walk family: every answer is the walk its prompt names on the fixed cycle of items, one token per item, the
held-out walks are none of the training ones."""
import numpy as np
import pytest

from relin.config.data import WalkConfig
from relin.config.loader import build
from relin.data.lists import item_words
from relin.data.rows import IGNORE_INDEX
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.data.walk import generate_walks, held_out, parse_prompt, walk, walk_words
from relin.errors import ConfigError

VOCABULARY = item_words(64)


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer("word", walk_words(64))


def test_answers_are_the_walk_the_prompt_names(tokenizer, seed):
    rows = generate_walks(60, 20, 8, VOCABULARY, "train", WordEncoder(tokenizer), np.random.default_rng(seed))
    for row in rows:
        ids, start = row["input_ids"], row["prompt_len"]
        assert row["task"] == "walk" and len(ids) == row["length"]
        assert row["labels"][:start] == [IGNORE_INDEX] * start and row["labels"][start:] == ids[start:]
        first, stride = parse_prompt(tokenizer.decode(ids[:start], skip_special_tokens=True))
        assert 1 <= stride <= 8
        at = VOCABULARY.index(first)
        expected = [VOCABULARY[(at + stride * i) % 64] for i in range(20)]  # an independent reading of the rule
        assert tokenizer.decode(ids[start:], skip_special_tokens=True).split() == expected
        assert row["answer"] == " ".join(expected) and row["answers"] == [row["answer"]]
        assert len(ids) - start == 21 and ids[-1] == tokenizer.eos_token_id  # one token per item, then eos


def test_held_out_walks_start_or_stride_apart_from_the_training_ones(tokenizer):
    encoder, rng = WordEncoder(tokenizer), np.random.default_rng(0)
    train = {parse_prompt(tokenizer.decode(r["input_ids"][:r["prompt_len"]], skip_special_tokens=True))
             for r in generate_walks(2000, 6, 8, VOCABULARY, "train", encoder, rng)}
    test = {parse_prompt(tokenizer.decode(r["input_ids"][:r["prompt_len"]], skip_special_tokens=True))
            for r in generate_walks(64, 6, 8, VOCABULARY, "test", encoder, rng)}
    assert train and test and not train & test
    assert walk(62, 3, 3, VOCABULARY) == [VOCABULARY[62], VOCABULARY[1], VOCABULARY[4]]


@pytest.mark.parametrize("vocab_size, max_stride, items, every", [(64, 8, 48, 8), (64, 8, 256, 8), (16, 3, 12, 8),
                                                                   (128, 64, 48, 8), (128, 8, 48, 2), (64, 16, 48, 4)])
def test_every_step_of_a_held_out_walk_is_taken_by_a_training_walk(vocab_size, max_stride, items, every):
    vocabulary = item_words(vocab_size)

    def steps(start, k):
        items_ = walk(start, k, items, vocabulary)
        return {(a, b, k) for a, b in zip(items_, items_[1:])}

    pairs = [(start, k) for start in range(vocab_size) for k in range(1, max_stride + 1)]
    test = [p for p in pairs if held_out(*p, vocab_size, every)]
    taken = set().union(*(steps(*p) for p in pairs if p not in test))
    assert test and len(test) <= len(pairs) / every + max_stride
    unseen = [p for p in test if not steps(*p) <= taken]
    assert not unseen, f"held-out walks with a step no training walk takes: {unseen[:4]}"


def test_held_out_answers_are_items_tokens_long(small_config):
    from relin.data.synth_text import build_synth_text

    data, _ = build_synth_text(small_config(walk={"items": 12, "vocab_size": 16, "max_stride": 3,
                                                  "train_examples": 20, "test_examples": 5}))
    test = [r for r in data["test"].to_list() if r["task"] == "walk"]
    assert len(test) == 5 and {len(r["input_ids"]) - r["prompt_len"] for r in test} == {13}
    assert sum(r["task"] == "walk" for r in data["train"].to_list()) == 20


def test_test_walks_are_distinct_held_out_pairs_and_ask_for_no_more_than_there_are(tokenizer):
    encoder = WordEncoder(tokenizer)
    rows = generate_walks(64, 6, 8, VOCABULARY, "test", encoder, np.random.default_rng(1))
    prompts = [tuple(r["input_ids"][:r["prompt_len"]]) for r in rows]
    assert len(set(prompts)) == 64, "every held-out pair once: a repeated prompt is no new item"
    with pytest.raises(ValueError, match="only 64 distinct"):
        generate_walks(65, 6, 8, VOCABULARY, "test", encoder, np.random.default_rng(1))
    with pytest.raises(ConfigError, match="test_examples: 65 distinct test walks asked, the held-out"):
        build(WalkConfig, {"test_examples": 65}, "data.walk")
    assert build(WalkConfig, {"vocab_size": 128, "held_out_every": 2, "test_examples": 512}, "data.walk")


def test_config_refuses_a_stride_as_long_as_the_cycle():
    with pytest.raises(ConfigError, match="max_stride"):
        build(WalkConfig, {"vocab_size": 8, "max_stride": 8}, "data.walk")
