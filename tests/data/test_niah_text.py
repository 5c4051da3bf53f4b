"""NIAH in the corpus's own form (issue #48): a needle assignment in held-out Python source, asked for at the end;
rows of the configured length, the needle on a line of its own at its depth, test rows only, and RULER's scorer
failing an answer with one wrong digit."""
import numpy as np
import pytest

from relin.config.real_text import BpeConfig, RealTextConfig
from relin.data.bpe import train_bpe
from relin.data.niah import string_match_all
from relin.data.niah_text import IDIOMS, NAME, TASK, generate_niah_text
from relin.data.real_text import build_real_text
from relin.data.tokenizer import WordEncoder
from relin.errors import ConfigError
from relin.eval.tasks import TASKS

LENGTHS, DEPTHS, PER_DEPTH = [96, 200], [0.0, 0.5, 1.0], 3


@pytest.fixture(scope="module")
def corpus():
    data, _ = build_real_text(RealTextConfig(max_bytes=200_000))
    return data["train"]["text"], data["test"]["text"], train_bpe(data["train"]["text"], BpeConfig(vocab_size=600))


@pytest.fixture(scope="module")
def rows(corpus):
    _, test, tokenizer = corpus
    return generate_niah_text(test, LENGTHS, DEPTHS, PER_DEPTH, 4, tokenizer, WordEncoder(tokenizer),
                              np.random.default_rng(0)), tokenizer


def test_rows_have_the_configured_length_and_end_by_asking_for_the_needle(rows):
    rows, tokenizer = rows
    assert len(rows) == len(LENGTHS) * len(DEPTHS) * PER_DEPTH
    assert [r["length"] for r in rows] == [n for n in LENGTHS for _ in range(len(DEPTHS) * PER_DEPTH)]
    for r in rows:
        ids, cut = r["input_ids"], r["prompt_len"]
        assert len(ids) == r["length"] and r["task"] == TASK
        prompt, answer = tokenizer.decode(ids[1:cut]), tokenizer.decode(ids[cut:-1])
        name = prompt.rsplit("\n", 1)[-1]
        assert name.startswith("magic_number_") and name.endswith(" =") and answer == " " + r["answer"]
        assert prompt.count(name) == 2, "the needle's assignment once in the haystack, asked for once at the end"
        needle = f"{name} {r['answer']}\n"
        at = prompt.index(needle)
        assert not prompt[:at].rsplit("\n", 1)[-1].strip(), "the needle opens its line (after any indentation)"
        tokens = [*tokenizer(name, add_special_tokens=False)["input_ids"], *ids[cut:-1],
                  *tokenizer("\n", add_special_tokens=False)["input_ids"]]
        end = next(i + len(tokens) for i in range(1, cut) if ids[i:i + len(tokens)] == tokens)
        assert r["needle_distance"] == cut - end
        assert r["depth"] != 0.0 or end == 1 + len(tokens), "depth 0: the needle opens the haystack, after bos"


def test_depth_moves_the_needle_towards_the_question(rows):
    rows, _ = rows
    for length in LENGTHS:
        by_depth = {d: np.mean([r["needle_distance"] for r in rows if r["length"] == length and r["depth"] == d])
                    for d in DEPTHS}
        assert by_depth[0.0] > by_depth[0.5] > by_depth[1.0] >= 0


def test_the_answer_is_copied_from_the_needle_token_for_token(rows):
    """The needle's value tokens are the answer's: a model that copies them scores 1, one wrong digit scores 0."""
    rows, tokenizer = rows
    for r in rows:
        ids, cut = r["input_ids"], r["prompt_len"]
        answer = ids[cut:-1]
        assert any(ids[i:i + len(answer)] == answer for i in range(1, cut - len(answer)))
        scoring = TASKS[TASK]
        assert scoring.kind == "generate" and scoring.score(tokenizer.decode(answer), r) == 1.0
        wrong = r["answer"][:-1] + str((int(r["answer"][-1]) + 1) % 10)
        assert scoring.score(" " + wrong, r) == 0.0
    assert string_match_all([" 1234"], [["1234"]]) == 100.0


def test_no_train_rows_and_one_line_without_held_out_files(small_config, corpus):
    from relin.data.synth_text import generate_rows

    train, test, tokenizer = corpus
    cfg = small_config(niah={**vars(small_config().niah), "families": ["single", "text"]})
    splits = generate_rows(cfg, tokenizer, {"train": train, "test": test})
    assert TASK not in {r["task"] for r in splits["train"]} and "niah_single" in {r["task"] for r in splits["train"]}
    assert sum(r["task"] == TASK for r in splits["test"]) == \
        len(cfg.niah.lengths) * len(cfg.niah.depths) * cfg.niah.test_examples_per_depth
    with pytest.raises(ConfigError, match="data.niah.families: text needs the real-text corpus"):
        generate_rows(cfg, tokenizer, None)
    assert NAME.format(key="alpha") == "magic_number_alpha ="


PROSE = ("The committee met on Tuesday. It reviewed the budget for the coming year! Members asked whether the "
         "harbour could be dredged before winter? The chairman said the engineers would report in the spring. ")


@pytest.fixture(scope="module")
def passkey_rows():
    texts = [PROSE * (3 + i) for i in range(6)]
    tokenizer = train_bpe(texts + [IDIOMS["passkey"].intro], BpeConfig(vocab_size=400))
    rows = generate_niah_text(texts, [240, 320], DEPTHS, PER_DEPTH, 5, tokenizer, WordEncoder(tokenizer),
                              np.random.default_rng(1), idiom="passkey")
    return rows, tokenizer


def test_the_passkey_idiom_hides_its_sentence_at_a_sentence_boundary(passkey_rows):
    rows, tokenizer = passkey_rows
    assert len(rows) == 2 * len(DEPTHS) * PER_DEPTH
    for r in rows:
        ids, cut, value = r["input_ids"], r["prompt_len"], r["answer"]
        assert len(ids) == r["length"] and len(value) == 5
        prompt = tokenizer.decode(ids[1:cut])
        assert prompt.startswith("There is an important piece of information hidden inside a lot of irrelevant text.")
        assert prompt.endswith("\n\nWhat is the pass key? The pass key is")
        assert tokenizer.decode(ids[cut:-1]) == " " + value
        needle = f" The pass key is {value}. Remember it. {value} is the pass key."
        before = prompt[:prompt.index(needle)]
        assert before.endswith(("\n", ".", "!", "?")), "the needle follows the intro, a line or a sentence"
    for length in (240, 320):
        by_depth = {d: np.mean([r["needle_distance"] for r in rows if r["length"] == length and r["depth"] == d])
                    for d in DEPTHS}
        assert by_depth[0.0] > by_depth[0.5] > by_depth[1.0] >= 0
