"""The real-text corpus (a pinned release's Python files): the same digest and bytes twice, one line on a changed
source, splits disjoint by file; the BPE learnt on it round-trips held-out files, and the synthetic tasks render
with it. A cap of a few hundred kB keeps every test to seconds."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from relin.config.loader import as_dict
from relin.config.real_text import LM_EVAL_0_4_13, BpeConfig, RealTextConfig
from relin.data.bpe import train_bpe, unigram_perplexity
from relin.data.real_text import SPLITS, build_real_text, read_source, split_of

from .test_synth_text import checkpoint_niah, small_config_dict

CAP = 300_000
SMALL_BPE = BpeConfig(vocab_size=600, seq_len=64)


def _config(**overrides) -> str:
    return json.dumps({"real_text": as_dict(RealTextConfig(max_bytes=CAP, **overrides))})


@pytest.fixture(scope="module")
def corpus():
    return build_real_text(RealTextConfig(max_bytes=CAP))


@pytest.fixture(scope="module")
def release_copy(tmp_path_factory) -> Path:
    """The installed release's .py files copied into a folder laid out as site-packages."""
    root = tmp_path_factory.mktemp("release")
    for f in read_source(RealTextConfig()):
        (root / f.path).parent.mkdir(parents=True, exist_ok=True)
        (root / f.path).write_bytes(f.data)
    return root


def test_stage_gives_the_pinned_digest_and_the_same_bytes_twice(tmp_path, relin):
    outs = [tmp_path / "a", tmp_path / "b"]
    for out in outs:
        code, err = relin("real-text", "--config", _config(), "--out", str(out))
        assert code == 0, err
    sources = [json.loads((out / "source.json").read_text()) for out in outs]
    assert sources[0] == sources[1]
    assert sources[0]["digest"] == LM_EVAL_0_4_13 and sources[0]["licence"] == "MIT"
    assert sources[0]["packages"] == [{"package": "lm_eval", "version": "0.4.13", "licence": "MIT",
                                       "digest": LM_EVAL_0_4_13, "files": 751,
                                       "bytes": sources[0]["source_bytes"]}]
    for split in SPLITS:
        arrows = [sorted((out / split).glob("*.arrow")) for out in outs]
        assert [p.read_bytes() for p in arrows[0]] == [p.read_bytes() for p in arrows[1]]


def test_a_copy_of_the_release_gives_its_digest_and_one_changed_byte_one_line(tmp_path, release_copy, relin):
    copy = tmp_path / "copy"
    shutil.copytree(release_copy, copy)
    assert relin("real-text", "--config", _config(source_dir=str(copy)), "--out", str(tmp_path / "same"))[0] == 0
    assert json.loads((tmp_path / "same" / "source.json").read_text())["digest"] == LM_EVAL_0_4_13

    target = copy / "lm_eval" / "api" / "task.py"
    data = bytearray(target.read_bytes())
    data[100] ^= 1
    target.write_bytes(bytes(data))
    out = tmp_path / "changed"
    code, err = relin("real-text", "--config", _config(source_dir=str(copy)), "--out", str(out))
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "lm_eval 0.4.13" in err and f"expected {LM_EVAL_0_4_13}" in err and "have digest sha256:" in err
    assert not out.exists() and not list(tmp_path.glob("changed*"))


def test_another_installed_version_is_one_line(tmp_path, relin):
    code, err = relin("real-text", "--config", _config(version="0.4.12"), "--out", str(tmp_path / "x"))
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "lm_eval 0.4.13 is installed, expected 0.4.12" in err and not (tmp_path / "x").exists()


def test_splits_are_disjoint_by_file_and_stable_under_the_cap(corpus):
    data, source = corpus
    paths = {split: data[split]["path"] for split in SPLITS}
    assert all(paths[s] == sorted(paths[s]) and len(paths[s]) > 0 for s in SPLITS)
    assert sum(map(len, paths.values())) == len(set().union(*map(set, paths.values())))
    assert all(split_of(p, 0.1, 0.1) == s for s, ps in paths.items() for p in ps)
    assert all(source["splits"][s]["bytes"] == sum(data[s]["bytes"]) for s in SPLITS)
    assert sum(source["splits"][s]["bytes"] for s in SPLITS) >= CAP
    smaller, _ = build_real_text(RealTextConfig(max_bytes=CAP // 3))
    assert all(set(smaller[s]["path"]) <= set(paths[s]) for s in SPLITS), "a smaller cap: a subset, same splits"


def test_bpe_round_trips_held_out_files_and_is_deterministic(tmp_path, corpus):
    from relin.data.tokenizer import load_tokenizer

    data, _ = corpus
    tokenizer = train_bpe(data["train"]["text"], SMALL_BPE)
    assert train_bpe(data["train"]["text"], SMALL_BPE).backend_tokenizer.to_str() == \
        tokenizer.backend_tokenizer.to_str()
    tokenizer.save_pretrained(tmp_path / "tok")
    loaded = load_tokenizer(tmp_path / "tok")
    assert len(loaded) == 600 and (loaded.pad_token_id, loaded.bos_token_id, loaded.eos_token_id) == (0, 1, 2)
    for text in [*data["validation"]["text"], *data["test"]["text"], "x = '<eos>'  \n\t\u00e9\u4e2d 1234\r\n"]:
        ids = loaded(text, add_special_tokens=False)["input_ids"]
        assert loaded.decode(ids) == text
        assert 2 not in ids, "the text '<eos>' must stay text, not the id that separates documents"
    assert loaded("a")["input_ids"][0] == loaded.bos_token_id


def test_unigram_perplexity_is_add_one_smoothed():
    train, test = np.array([0, 0, 1]), np.array([0, 2])
    expected = np.exp(-(np.log(3 / 6) + np.log(1 / 6)) / 2)  # counts 2, 1, 0 (+1 each) over 3 + 3
    assert unigram_perplexity(train, test, 3) == pytest.approx(expected)


def test_bpe_stage_packs_every_split_and_synth_text_renders_with_it(tmp_path, relin):
    from datasets import load_from_disk

    from relin.data.tokenizer import WordEncoder, load_tokenizer
    from relin.stages._training import TextData

    assert relin("real-text", "--config", _config(), "--out", str(tmp_path / "real_text"))[0] == 0
    code, err = relin("bpe-tokenizer", "--config", json.dumps({"bpe": as_dict(SMALL_BPE)}),
                      "--corpus", str(tmp_path / "real_text"), "--out", str(tmp_path / "bpe"))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "real_text").iterdir()) == [
        "dataset_dict.json", "source.json", "test", "train", "validation"], "no cache files in the corpus folder"
    rows = load_from_disk(str(tmp_path / "bpe"))
    stats = json.loads((tmp_path / "bpe" / "stats.json").read_text())
    for split in SPLITS:
        assert set(rows[split]["task"]) == {"corpus"} and {len(r) for r in rows[split]["input_ids"]} == {64}
        assert stats["splits"][split]["tokens"] == 64 * len(rows[split])
    assert stats["vocab_size"] == 600 and stats["unigram_perplexity"]["test"] > 1
    assert len(TextData.load(tmp_path / "bpe").input_ids) == len(rows["train"])

    data = {**small_config_dict(), "niah": checkpoint_niah()}
    code, err = relin("synth-text", "--config", json.dumps({"data": data}),
                      "--tokenizer", str(tmp_path / "bpe" / "tokenizer"), "--out", str(tmp_path / "synth"))
    assert code == 0, err
    tokenizer = load_tokenizer(tmp_path / "synth" / "tokenizer")
    assert tokenizer.get_vocab() == load_tokenizer(tmp_path / "bpe" / "tokenizer").get_vocab()
    assert WordEncoder(tokenizer).prefix == " "
    synth = load_from_disk(str(tmp_path / "synth"))
    for row in synth["test"]:
        assert row["input_ids"][0] == tokenizer.bos_token_id and max(row["input_ids"]) < 600
        if row["task"] in ("niah_single", "arithmetic"):
            assert tokenizer.decode(row["input_ids"][row["prompt_len"]:], skip_special_tokens=True).strip() == \
                row["answer"]


def test_the_projects_tokenizer_keeps_a_token_per_task_word_and_adds_text_rows(tmp_path, relin, corpus):
    """data.tokenizer bpe: the BPE learnt on the corpus plus every task word as one token, so task rows keep their
    word-tokenizer lengths; the text rows are the train files cut at data.text.train_lengths and one test file per
    row, and the stats hold the unigram bar a model of the text must clear."""
    from datasets import load_from_disk
    from datasets.utils.logging import disable_progress_bar

    from relin.data.text_rows import TASK
    from relin.data.tokenizer import WordEncoder, load_tokenizer

    data, _ = corpus
    disable_progress_bar()
    data.save_to_disk(str(tmp_path / "real_text"))
    train_bpe(data["train"]["text"], SMALL_BPE).save_pretrained(tmp_path / "bpe")
    config = {**small_config_dict(), "tokenizer": "bpe",
              "text": {"train_lengths": [32, 96], "train_examples": 40, "test_files": 5, "test_len": 300}}
    code, err = relin("synth-text", "--config", json.dumps({"data": config}), "--out", str(tmp_path / "no_bpe"))
    assert code == 2 and err.count("\n") == 1 and "data.tokenizer: bpe" in err and "--bpe" in err
    code, err = relin("synth-text", "--config", json.dumps({"data": config}), "--bpe", str(tmp_path / "bpe"),
                      "--real-text", str(tmp_path / "real_text"), "--out", str(tmp_path / "synth"))
    assert code == 0, err
    code, err = relin("synth-text", "--config", json.dumps({"data": {**config, "tokenizer": "word"}}),
                      "--out", str(tmp_path / "synth_word"))
    assert code == 0, err
    words = load_from_disk(str(tmp_path / "synth_word"))
    synth = load_from_disk(str(tmp_path / "synth"))
    tokenizer = load_tokenizer(tmp_path / "synth" / "tokenizer")
    assert len(tokenizer) > 600 and WordEncoder(tokenizer).prefix == " "
    for split in ("train", "test"):
        task_rows = sorted((t, len(ids)) for t, ids in zip(synth[split]["task"], synth[split]["input_ids"])
                           if t != TASK)
        assert task_rows == sorted((t, len(ids)) for t, ids in zip(words[split]["task"], words[split]["input_ids"])), \
            "a task word is one token, as in the word tokenizer"
    text = [ids for t, ids in zip(synth["train"]["task"], synth["train"]["input_ids"]) if t == TASK]
    assert len(text) == 40 and sorted(map(len, text)) == [32] * 20 + [96] * 20, "the lengths in turn"
    tests = [ids for t, ids in zip(synth["test"]["task"], synth["test"]["input_ids"]) if t == TASK]
    assert len(tests) == 5 and all(ids[0] == tokenizer.bos_token_id and len(ids) <= 300 for ids in tests)
    first = tokenizer(data["test"]["text"][0], add_special_tokens=False)["input_ids"]
    assert tests[0][1:] == first[:299], "a test row is its file's first tokens: positions are positions in the file"
    stats = json.loads((tmp_path / "synth" / "stats.json").read_text())
    assert stats["text_unigram_perplexity"] > 1
