"""The list family: every answer is the copy or the reversal of its prompt's items, one token per item, and the
held-out lists are exactly ``items`` long."""
import numpy as np
import pytest

from relin.config.data import ListsConfig
from relin.config.loader import build
from relin.data.lists import OPS, answer_items, generate_lists, item_words, list_words, parse_list
from relin.data.rows import IGNORE_INDEX
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.errors import ConfigError


@pytest.fixture(scope="module")
def tokenizer():
    return build_tokenizer("word", list_words(64))


@pytest.mark.parametrize("op", OPS)
def test_answers_are_the_prompt_items_copied_or_reversed(op, tokenizer, seed):
    vocabulary = item_words(64)
    rows = generate_lists(op, 60, 4, 20, vocabulary, WordEncoder(tokenizer), np.random.default_rng(seed))
    assert {r["task"] for r in rows} == {f"list_{op}"}
    for row in rows:
        ids, start = row["input_ids"], row["prompt_len"]
        assert row["labels"][:start] == [IGNORE_INDEX] * start and row["labels"][start:] == ids[start:]
        assert ids[-1] == tokenizer.eos_token_id and len(ids) == row["length"]
        read_op, items = parse_list(tokenizer.decode(ids[:start], skip_special_tokens=True))
        assert read_op == op and 4 <= len(items) <= 20 and len(set(items)) == len(items)
        expected = items if op == "copy" else items[::-1]
        assert tokenizer.decode(ids[start:], skip_special_tokens=True).split() == expected
        assert row["answer"] == " ".join(expected) and row["answers"] == [row["answer"]]
        assert len(ids) - start == len(items) + 1  # one token per item, then eos


def test_held_out_answers_are_items_tokens_long(small_config):
    from relin.data.synth_text import build_synth_text

    cfg = small_config(lists={"ops": ["copy", "reverse"], "items": 12, "min_items": 3, "vocab_size": 16,
                              "train_examples": 20, "test_examples": 5})
    data, _ = build_synth_text(cfg)
    test = [r for r in data["test"].to_list() if r["task"].startswith("list_")]
    assert {r["task"] for r in test} == {"list_copy", "list_reverse"} and len(test) == 10
    assert {len(r["input_ids"]) - r["prompt_len"] for r in test} == {13}
    train = [len(r["answer"].split()) for r in data["train"].to_list() if r["task"].startswith("list_")]
    assert min(train) >= 3 and max(train) <= 12 and len(train) == 40


def test_answer_items():
    assert answer_items("copy", ["xa", "xb", "xc"]) == ["xa", "xb", "xc"]
    assert answer_items("reverse", ["xa", "xb", "xc"]) == ["xc", "xb", "xa"]
    with pytest.raises(ValueError, match="sort"):
        answer_items("sort", ["xa"])


@pytest.mark.parametrize("bad, message", [({"items": 70, "vocab_size": 64}, "vocab_size >= 70"),
                                          ({"min_items": 9, "items": 8}, "min_items"),
                                          ({"ops": ["copy", "copy"]}, "distinct")])
def test_config_refuses_lists_it_cannot_draw(bad, message):
    with pytest.raises(ConfigError, match=message):
        build(ListsConfig, bad, "data.lists")
