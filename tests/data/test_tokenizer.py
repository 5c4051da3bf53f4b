import numpy as np
import pytest

from relin.data.arithmetic import problem
from relin.data.filler import FillerLanguage
from relin.data.niah import NEEDLE, NEEDLE_KEYS
from relin.data.synth_text import vocabulary_words
from relin.data.tokenizer import WordEncoder, build_tokenizer
from relin.errors import ConfigError


def _texts(rng: np.random.Generator) -> list[str]:
    language = FillerLanguage(200)
    texts = [" ".join(w for _ in range(5) for w in language.sentence(rng)) for _ in range(20)]
    texts += [problem(3, 50, rng)[0] + " 17" for _ in range(20)]
    texts += [NEEDLE.format(key=NEEDLE_KEYS[rng.integers(len(NEEDLE_KEYS))], value=rng.integers(1, 10**7))
              for _ in range(20)]
    return texts


@pytest.mark.parametrize("kind", ["word", "char"])
def test_round_trip_and_word_by_word_encoding(kind, seed, small_config):
    tokenizer = build_tokenizer(kind, vocabulary_words(small_config(filler={"vocab_size": 200})))
    encoder = WordEncoder(tokenizer)
    for text in _texts(np.random.default_rng(seed)):
        ids = tokenizer(text)["input_ids"]
        assert ids[0] == tokenizer.bos_token_id
        assert tokenizer.unk_token_id not in ids, text
        assert tokenizer.decode(ids, skip_special_tokens=True) == text
        assert encoder.ids(text) == ids[1:]


def test_word_level_splits_numbers_into_digits():
    tokenizer = build_tokenizer("word", ["answer"])
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("answer: 1204,", add_special_tokens=False)["input_ids"])
    assert tokens == ["\u2581answer", ":", "\u2581", "1", "2", "0", "4", ","]


def test_vocabulary_is_small_and_saved_tokenizer_reloads(tmp_path, small_config):
    from transformers import PreTrainedTokenizerFast

    tokenizer = build_tokenizer("word", vocabulary_words(small_config(filler={"vocab_size": 200})))
    assert 100 < len(tokenizer) < 600
    tokenizer.save_pretrained(tmp_path)
    loaded = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    text = "one of the special magic numbers for alpha is: 90210."
    assert loaded(text)["input_ids"] == tokenizer(text)["input_ids"]
    assert (loaded.pad_token, loaded.bos_token, loaded.eos_token, loaded.unk_token) == (
        "<pad>", "<bos>", "<eos>", "<unk>")


def test_unknown_tokenizer_kind_is_a_config_error():
    with pytest.raises(ConfigError, match="data.tokenizer"):
        build_tokenizer("bpe", ["a"])


@pytest.mark.parametrize("family", ["qwen", "pythia"])
def test_a_checkpoints_byte_level_bpe_encodes_word_by_word_with_the_leading_space(family, seed):
    from ..fake_hub import bpe_tokenizer

    tokenizer = bpe_tokenizer(family)
    encoder = WordEncoder(tokenizer)
    assert encoder.prefix == " "
    for text in _texts(np.random.default_rng(seed)):
        ids = tokenizer(" " + text, add_special_tokens=False)["input_ids"]
        assert encoder.ids(text) == ids
        assert tokenizer.decode(ids) == " " + text


def test_a_checkpoint_without_bos_starts_rows_with_its_eos():
    from ..fake_hub import bpe_tokenizer

    qwen, pythia = WordEncoder(bpe_tokenizer("qwen")), WordEncoder(bpe_tokenizer("pythia"))
    assert qwen.tokenizer.bos_token_id is None and qwen.bos == qwen.eos == qwen.tokenizer.eos_token_id
    assert pythia.bos == pythia.tokenizer.bos_token_id


def test_a_tokenizer_that_merges_across_spaces_is_refused_in_one_line():
    from tokenizers import Tokenizer, models, trainers
    from transformers import PreTrainedTokenizerFast

    from relin.errors import InputError

    core = Tokenizer(models.BPE(unk_token="<unk>"))  # no pre-tokenizer: merges run across word boundaries
    core.train_from_iterator(["the cat 7 sat. key 12 is value:"] * 50,
                             trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>", "<eos>"]))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<eos>", unk_token="<unk>")
    with pytest.raises(InputError, match="are not its words' ids joined") as err:
        WordEncoder(tokenizer)
    assert "\n" not in str(err.value)
