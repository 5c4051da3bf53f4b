"""Multi-query associative recall, following Zoology (``zoology/data/multiquery_ar.py``).

Layout of one example (``seq_len`` words including bos)::

    bos  k1 v1 k2 v2 ... kP vP   [queries: k_i v_i placed at power-law gaps, random fill between]

Keys and values come from disjoint vocabularies and are drawn without replacement; the query slots are
drawn with ``p(gap) ∝ a·gap^(a-1)`` (Zoology's ``power_a``), so most queries come soon after the pairs.
Only the value after each query key is supervised. Random fill words come from both vocabularies as in
Zoology, except this example's own keys: a stray ``k_i v_x`` would contradict the pair being recalled.
"""
from __future__ import annotations

import numpy as np

from ..config.data import MQARSetting
from .rows import IGNORE_INDEX, row


def mqar_vocabulary(num_keys: int, num_values: int) -> tuple[list[str], list[str]]:
    """Key words ``k<code>`` and value words ``v<code>`` (letters only: digits are split by the tokenizer)."""
    return [f"k{_code(i)}" for i in range(num_keys)], [f"v{_code(i)}" for i in range(num_values)]


def _code(i: int) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    out = letters[i % 26]
    while i >= 26:
        i = i // 26 - 1
        out = letters[i % 26] + out
    return out


def generate_mqar(setting: MQARSetting, keys: list[str], values: list[str], power_a: float,
                  encoder, rng: np.random.Generator) -> list[dict]:
    """``setting.examples`` MQAR rows; with the word tokenizer every word is one token."""
    pairs, body = setting.num_pairs, setting.seq_len - 1
    context = 2 * pairs
    slots = (body - context) // 2
    gaps = np.arange(1, slots + 1, dtype=np.float64)
    p_slot = power_a * gaps ** (power_a - 1)
    p_slot /= p_slot.sum()
    rows = []
    for _ in range(setting.examples):
        key_idx = rng.choice(len(keys), size=pairs, replace=False)
        value_idx = rng.choice(len(values), size=pairs, replace=False)
        query_slots = rng.choice(slots, size=pairs, replace=False, p=p_slot)
        own = set(key_idx.tolist())
        fill = [k for i, k in enumerate(keys) if i not in own] + values
        words = [fill[i] for i in rng.integers(len(fill), size=body)]
        supervised = [False] * body
        for j, (k, v) in enumerate(zip(key_idx, value_idx)):
            words[2 * j], words[2 * j + 1] = keys[k], values[v]
        for j, slot in enumerate(query_slots):
            pos = context + 2 * slot
            words[pos], words[pos + 1] = keys[key_idx[j]], values[value_idx[j]]
            supervised[pos + 1] = True
        input_ids, labels = [encoder.bos], [IGNORE_INDEX]
        for word, target in zip(words, supervised):
            ids = encoder.word(word)
            input_ids += ids
            labels += ids if target else [IGNORE_INDEX] * len(ids)
        answers = [values[value_idx[j]] for j in np.argsort(query_slots)]
        rows.append(row("mqar", input_ids, labels, answer=" ".join(answers), answers=answers,
                        length=setting.seq_len, num_pairs=pairs))
    return rows
