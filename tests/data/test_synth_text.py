import json

import pytest

from relin.cli import main
from relin.data.rows import COLUMNS, IGNORE_INDEX
from relin.data.synth_text import build_synth_text
from relin.errors import ConfigError

TASKS = {"mqar", "niah_single", "niah_multikey", "niah_multiquery", "arithmetic", "walk", "filler"}


def _rows(data) -> dict[str, list[dict]]:
    return {split: data[split].to_list() for split in data}


def test_same_seed_same_dataset_other_seed_different(small, small_config):
    cfg, data, _ = small
    again, _ = build_synth_text(small_config(seed=cfg.seed))
    assert _rows(again) == _rows(data)
    other, _ = build_synth_text(small_config(seed=cfg.seed + 1))
    for split in data:
        assert other[split]["input_ids"] != data[split]["input_ids"]


def test_changing_one_task_leaves_the_others_unchanged(small, small_config):
    cfg, data, _ = small
    changed, _ = build_synth_text(small_config(seed=cfg.seed, arithmetic={"max_operand": 9, "test_examples": 16}))
    keep = [r for r in data["test"].to_list() if r["task"] != "arithmetic"]
    assert keep == [r for r in changed["test"].to_list() if r["task"] != "arithmetic"]


def test_every_row_follows_the_contract(small):
    cfg, data, tokenizer = small
    assert set(data) == {"train", "test"}
    for split in data:
        assert tuple(data[split].column_names) == COLUMNS
        assert set(data[split]["task"]) == TASKS
        for row in data[split]:
            ids, labels, start, task = row["input_ids"], row["labels"], row["prompt_len"], row["task"]
            assert ids[0] == tokenizer.bos_token_id and len(ids) == len(labels)
            assert tokenizer.unk_token_id not in ids and max(ids) < len(tokenizer)
            assert all(label == IGNORE_INDEX for label in labels[:start]) and labels[start] != IGNORE_INDEX
            assert all(label in (IGNORE_INDEX, token) for label, token in zip(labels, ids))
            if task == "filler":
                assert labels[1:] == ids[1:] and start == 1 and len(ids) == row["length"] == cfg.filler.seq_len
            elif task == "mqar":
                assert sum(label != IGNORE_INDEX for label in labels) == row["num_pairs"] == len(row["answers"])
                assert len(ids) == row["length"]
            else:
                assert labels[start:] == ids[start:] and ids[-1] == tokenizer.eos_token_id
                decoded = tokenizer.decode(ids[start:], skip_special_tokens=True)
                assert decoded == row["answer"] == ", ".join(row["answers"])
            if task.startswith("niah"):
                assert len(ids) == row["length"] and 0.0 <= row["depth"] <= 1.0
            else:
                assert row["depth"] == -1.0
            if task != "mqar":
                assert row["num_pairs"] == 0
    lengths = {r["length"] for r in data["test"].to_list() if r["task"] == "niah_single"}
    assert lengths == set(cfg.niah.lengths)
    depths = {r["depth"] for r in data["test"].to_list() if r["task"] == "niah_single"}
    assert sorted(depths) == pytest.approx(sorted(set(cfg.niah.depths)))


def test_char_tokenizer_builds_the_same_tasks(small_config):
    niah = {"lengths": [400], "train_lengths": [400], "train_examples": 4, "num_keys": 2}
    data, tokenizer = build_synth_text(small_config(tokenizer="char", niah=niah))
    assert len(tokenizer) < 80
    for row in data["test"]:
        if row["task"] in ("niah_single", "arithmetic"):
            start = row["prompt_len"]
            assert tokenizer.decode(row["input_ids"][start:], skip_special_tokens=True) == row["answer"]


def test_stage_writes_dataset_tokenizer_and_stats(tmp_path, small_config, relin):
    from datasets import load_from_disk
    from transformers import PreTrainedTokenizerFast

    from relin.config.loader import as_dict

    out = tmp_path / "synth_text"
    config = json.dumps({"data": as_dict(small_config())})
    code, err = relin("synth-text", "--config", config, "--out", str(out))
    assert code == 0, err
    data = load_from_disk(str(out))
    tokenizer = PreTrainedTokenizerFast.from_pretrained(out / "tokenizer")
    stats = json.loads((out / "stats.json").read_text())
    assert stats["train"]["rows"] == len(data["train"]) and stats["vocab_size"] == len(tokenizer)
    assert stats["test"]["max_len"] == max(map(len, data["test"]["input_ids"]))
    assert "generation_s" not in stats, "a wall time would make identical data hash differently"
    record = json.loads((tmp_path / "synth_text.relin-run.json").read_text())
    assert record["stage"] == "synth-text" and record["generation_s"] > 0 and not (out / "relin-run.json").exists()
    first = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    code, err = relin("synth-text", "--config", config, "--out", str(out))
    assert code == 0, err
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == first


@pytest.mark.parametrize("bad, message", [
    ({"mqar": {"train": [{"seq_len": 16, "num_pairs": 8, "examples": 4}]}}, "data.mqar.train[0].seq_len"),
    ({"niah": {"depths": [1.5]}}, "data.niah.depths[0]"),
    ({"tokenizer": "sentencepiece"}, "data.tokenizer"),
    ({"filler": {"vocab_size": 500}}, "data.filler.vocab_size"),
])
def test_bad_config_is_one_line_naming_the_key(tmp_path, small_config, relin, bad, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
        small_config(**bad)
    code, err = relin("synth-text", "--config", json.dumps({"data": bad}), "--out", str(tmp_path / "x"))
    assert code == 2 and not (tmp_path / "x").exists()
    assert err.count("\n") == 1 and err.startswith(f"relin synth-text: error: {message}")


def test_niah_length_too_short_for_the_family_is_a_config_error(small_config):
    with pytest.raises(ConfigError, match="data.niah.lengths: 40 tokens"):
        build_synth_text(small_config(niah={"lengths": [40], "train_examples": 0}))


@pytest.mark.parametrize("kind", ["word", "char"])
def test_longest_answers_count_from_the_config_as_the_built_tokenizer_does(kind, small_config):
    """The Snakefile's pre-flight check counts answer tokens without transformers (``word_level_tokenizer``): the
    count is the one the stage's tokenizer gives, and no transformers (nor torch) is imported for it."""
    import subprocess
    import sys

    from relin.data.synth_text import longest_answer_tokens
    from relin.data.tokenizer import build_tokenizer

    cfg = small_config(tokenizer=kind)
    counts = longest_answer_tokens(cfg)
    assert counts and counts == longest_answer_tokens(cfg, build_tokenizer(kind, []))
    imported = subprocess.run([sys.executable, "-c", "import sys; from relin.config.data import DataConfig; "
                               "from relin.data.synth_text import longest_answer_tokens; "
                               "longest_answer_tokens(DataConfig()); print(sorted({'transformers', 'torch'} & "
                               "set(sys.modules)))"], capture_output=True, text=True, check=True).stdout
    assert imported.strip() == "[]", imported


@pytest.mark.parametrize("family", ["qwen", "pythia"])
def test_tasks_rendered_with_a_checkpoints_tokenizer_read_as_the_same_text(family, small_config):
    """Every row decodes to its task's text under the checkpoint's tokenizer; rows keep their lengths in tokens
    (NIAH, filler) and their gold answers; the saved tokenizer is the checkpoint's."""
    from relin.data.synth_text import longest_answer_tokens

    from ..fake_hub import bpe_tokenizer

    tokenizer = bpe_tokenizer(family)
    cfg = small_config(niah=checkpoint_niah())
    data, used = build_synth_text(cfg, tokenizer)
    assert used is tokenizer
    ids_seen = set()
    for row in data["test"].to_list() + data["train"].to_list()[:200]:
        ids_seen.update(row["input_ids"])
        assert row["input_ids"][0] == (tokenizer.bos_token_id if tokenizer.bos_token_id is not None
                                       else tokenizer.eos_token_id)
        if row["task"] in ("filler", "niah_single", "niah_multikey", "niah_multiquery"):
            assert len(row["input_ids"]) == row["length"], row["task"]
        if row["answer"]:
            supervised = (row["input_ids"][row["prompt_len"]:] if row["task"] != "mqar" else
                          [label for label in row["labels"] if label != IGNORE_INDEX])
            answer = tokenizer.decode(supervised, skip_special_tokens=True)
            assert answer.strip() == row["answer"], row["task"]
    assert max(ids_seen) < len(tokenizer)
    assert set(longest_answer_tokens(cfg, tokenizer)) == {"niah_single", "niah_multikey", "niah_multiquery",
                                                          "arithmetic"}


def test_synth_text_renders_with_a_checkpoint_tokenizer_by_id(hub_cache, tmp_path, monkeypatch):
    """``relin synth-text --tokenizer ID`` reads the id from the hub cache and saves that tokenizer with the data."""
    from relin.data.tokenizer import load_tokenizer

    from ..fake_hub import bpe_tokenizer, place_in_cache

    bpe_tokenizer("qwen").save_pretrained(tmp_path / "ckpt")
    place_in_cache(hub_cache, "Qwen/Qwen3-4B", tmp_path / "ckpt")
    monkeypatch.setenv("RELIN_TRACKING", "0")
    smoke = {**small_config_dict(), "niah": checkpoint_niah()}
    main(["synth-text", "--config", json.dumps({"data": smoke}), "--tokenizer", "Qwen/Qwen3-4B",
          "--out", str(tmp_path / "data")])
    saved = load_tokenizer(tmp_path / "data" / "tokenizer")
    assert saved.get_vocab() == load_tokenizer("Qwen/Qwen3-4B").get_vocab()
    assert saved.chat_template == load_tokenizer("Qwen/Qwen3-4B").chat_template


def small_config_dict() -> dict:
    import yaml

    from .conftest import SMOKE

    return yaml.safe_load(SMOKE.read_text())["data"]


def checkpoint_niah() -> dict:
    """The smoke NIAH section at lengths a BPE's longer needles fit in (its numbers take a token per digit)."""
    return {**small_config_dict()["niah"], "train_lengths": [160], "lengths": [160, 200]}
