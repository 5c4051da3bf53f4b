"""The digit-copy family (OPAL's Table 3 on a checkpoint teacher): a number, then the same number; every digit one
token, the answer supervised with its eos, scored on the answer alone, one wrong digit failing it."""
import numpy as np

from relin.artifacts import IGNORE_INDEX
from relin.config.real_text import BpeConfig
from relin.data.bpe import train_bpe
from relin.data.digit_copy import TASK, generate_digit_copies
from relin.data.tokenizer import WordEncoder
from relin.eval.tasks import TASKS


def test_rows_copy_their_number_and_are_scored_on_the_answer_alone():
    tokenizer = train_bpe(["Number: 0123456789\nThe same number again: 9876543210\n"] * 4, BpeConfig(vocab_size=300))
    encoder = WordEncoder(tokenizer)
    rows = generate_digit_copies(5, 12, tokenizer, encoder, np.random.default_rng(0))
    assert len({r["answer"] for r in rows}) == 5
    scoring = TASKS[TASK]
    for r in rows:
        ids, cut = r["input_ids"], r["prompt_len"]
        prompt = tokenizer.decode(ids[1:cut])
        assert prompt.startswith("Number:") and r["answer"] in prompt.replace(" ", "")
        answer = ids[cut:-1]
        assert tokenizer.decode(answer).replace(" ", "") == r["answer"] and ids[-1] == encoder.eos
        assert [t for t in r["labels"] if t != IGNORE_INDEX] == [*answer, encoder.eos]
        assert len(ids) == r["length"] and scoring.budget(r) == len(answer)
        assert scoring.score_tokens(answer, r) == 1.0
        assert scoring.score_tokens([*answer, 7, 7], r) == 1.0, "what follows the answer is not scored"
        wrong = list(answer)
        wrong[-1] = next(t for t in answer if t != wrong[-1]) if len(set(answer)) > 1 else wrong[-1] + 1
        assert scoring.score_tokens(wrong, r) == 0.0
