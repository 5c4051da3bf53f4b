import re

import numpy as np

from relin.data.arithmetic import generate_arithmetic, parse_answer, problem
from relin.data.rows import IGNORE_INDEX
from relin.data.synth_text import vocabulary_words
from relin.data.tokenizer import WordEncoder, build_tokenizer

OPERATIONS = {"gets": 1, "finds": 1, "buys": 1, "gives away": -1, "loses": -1, "eats": -1}


def _solve(text: str) -> int:
    """An independent reading of a problem: the start count, then each step's signed amount."""
    count = int(re.search(r"has (\d+)", text).group(1))
    for verb, amount in re.findall(r"(gets|finds|buys|gives away|loses|eats) (\d+)", text):
        count += OPERATIONS[verb] * int(amount)
        assert count >= 0
    return count


def test_problems_have_the_answer_their_text_implies(seed):
    rng = np.random.default_rng(seed)
    for steps in (1, 2, 3, 5):
        for _ in range(50):
            text, answer = problem(steps, 20, rng)
            assert text.endswith("answer:") and text.count(".") == steps + 1
            assert _solve(text) == answer


def test_rows_supervise_only_the_answer_and_it_parses_back(seed, small_config):
    tokenizer = build_tokenizer("word", vocabulary_words(small_config()))
    rows = generate_arithmetic(100, [1, 3], 20, WordEncoder(tokenizer), np.random.default_rng(seed))
    for row in rows:
        ids, start = row["input_ids"], row["prompt_len"]
        assert row["labels"][:start] == [IGNORE_INDEX] * start and row["labels"][start:] == ids[start:]
        assert ids[-1] == tokenizer.eos_token_id and len(ids) <= row["length"] < len(ids) + 16
        prompt = tokenizer.decode(ids[:start], skip_special_tokens=True)
        assert _solve(prompt) == int(row["answer"]) == parse_answer(tokenizer.decode(ids[start:]))
        assert parse_answer(tokenizer.decode(ids, skip_special_tokens=True)) == int(row["answer"])


def test_parse_answer():
    assert parse_answer(" 6") == 6
    assert parse_answer("answer: 12 apples") == 12
    assert parse_answer("tom has 3 apples. answer: 41") == 41
    assert parse_answer("answer: 7, no 9") == 7
    assert parse_answer("i do not know") is None
    assert parse_answer("") is None
