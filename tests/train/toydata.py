"""Toy rows in the synth-text row schema (MQAR only) and a word-level tokenizer with the project's special tokens."""
from __future__ import annotations

import random

KEYS = [f"k{i}" for i in range(12)]
VALUES = [f"v{i}" for i in range(12)]
SPECIAL = ["<pad>", "<bos>", "<eos>", "<unk>"]


def word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIAL + KEYS + VALUES)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", bos_token="<bos>",
                                   eos_token="<eos>", unk_token="<unk>")


def mqar_row(tokenizer, rng: random.Random, num_pairs: int) -> dict:
    """``<bos> k v k v ... k v k v``: pairs, then the same keys queried; labels on the queried values."""
    keys = rng.sample(KEYS, num_pairs)
    table = {k: rng.choice(VALUES) for k in keys}
    queries = rng.sample(keys, num_pairs)
    words = [w for k in keys for w in (k, table[k])] + [w for k in queries for w in (k, table[k])]
    ids = [tokenizer.bos_token_id] + tokenizer.convert_tokens_to_ids(words)
    prompt = 1 + 2 * num_pairs
    labels = [-100] * prompt + [tok if (i % 2) else -100 for i, tok in enumerate(ids[prompt:])]
    return {"task": "mqar", "input_ids": ids, "labels": labels, "prompt_len": prompt,
            "answer": table[queries[0]], "answers": [table[queries[0]]], "length": len(ids),
            "depth": -1.0, "num_pairs": num_pairs}


def toy_rows(tokenizer, n: int, seed: int, pairs=(2, 3)) -> list[dict]:
    rng = random.Random(seed)
    return [mqar_row(tokenizer, rng, rng.choice(pairs)) for _ in range(n)]
