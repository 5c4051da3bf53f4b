import numpy as np

from relin.config.data import MQARSetting
from relin.data.mqar import generate_mqar, mqar_vocabulary
from relin.data.rows import IGNORE_INDEX
from relin.data.synth_text import vocabulary_words
from relin.data.tokenizer import WordEncoder, build_tokenizer


def test_labels_only_at_values_after_query_keys(seed, small_config):
    cfg = small_config()
    tokenizer = build_tokenizer("word", vocabulary_words(cfg))
    keys, values = mqar_vocabulary(cfg.mqar.num_keys, cfg.mqar.num_values)
    key_ids = {WordEncoder(tokenizer).word(k)[0] for k in keys}
    value_ids = {WordEncoder(tokenizer).word(v)[0] for v in values}
    assert not key_ids & value_ids
    setting = MQARSetting(seq_len=64, num_pairs=8, examples=50)
    rows = generate_mqar(setting, keys, values, 0.01, WordEncoder(tokenizer), np.random.default_rng(seed))
    for row in rows:
        ids, labels = row["input_ids"], row["labels"]
        assert len(ids) == len(labels) == 64 and ids[0] == tokenizer.bos_token_id
        pairs = dict(zip(ids[1:17:2], ids[2:17:2]))
        assert len(pairs) == 8 and set(pairs) <= key_ids and set(pairs.values()) <= value_ids
        supervised = [i for i, label in enumerate(labels) if label != IGNORE_INDEX]
        assert len(supervised) == 8 and supervised[0] == row["prompt_len"] > 16
        for i in supervised:
            assert labels[i] == ids[i] == pairs[ids[i - 1]]
        queried = [ids[i - 1] for i in supervised]
        assert sorted(queried) == sorted(pairs)
        assert row["answers"] == [tokenizer.decode([ids[i]]) for i in supervised]
        assert row["num_pairs"] == 8 and row["length"] == 64 and row["depth"] == -1.0


def test_query_gaps_follow_a_decreasing_power_law(seed, small_config):
    cfg = small_config()
    tokenizer = build_tokenizer("word", vocabulary_words(cfg))
    keys, values = mqar_vocabulary(cfg.mqar.num_keys, cfg.mqar.num_values)
    setting = MQARSetting(seq_len=129, num_pairs=4, examples=400)
    rows = generate_mqar(setting, keys, values, 0.01, WordEncoder(tokenizer), np.random.default_rng(seed))
    positions = np.array([i for row in rows for i, label in enumerate(row["labels"]) if label != IGNORE_INDEX])
    slots = (positions - 1 - 8 - 1) // 2
    assert slots.min() >= 0 and slots.max() < 60
    near, far = (slots < 30).sum(), (slots >= 30).sum()
    assert near > far
