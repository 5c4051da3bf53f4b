"""``relin opal-convert`` as the paper config runs it: the teacher is a checkpoint on disk (here a tiny
``Qwen3ForCausalLM`` saved like a hub download), resolved by ``relin teacher-lm`` and converted
without the network."""
import json

import pytest

from relin.cli import main
from relin.config.teacher import TeacherModelConfig
from relin.models.teachers import build_teacher, load_pretrained

from .toydata import word_tokenizer

SCORING = {"opal.layer_scoring": {"rows": 64, "max_len": 0}}
PATTERN = {"opal.layer_selection": "every_n", "opal.keep_every": 4, "opal.attention_layers": [],
           "opal.kernel_backend": "auto", **SCORING}
GDN = {**PATTERN, "opal.gdn": {"conv_size": 4, "conv_activation": "silu", "qk_norm": True, "allow_neg_eigval": False}}
SWA = {"opal.swa": {"window": 8, "sinks": 2, "layout": "all"}, "opal.kernel_backend": "auto", **SCORING}
SWA_HYBRID = {**SWA, "opal.swa": {**SWA["opal.swa"], "layout": "hybrid"}}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("RELIN_TRACKING", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def checkpoint(tmp_path):
    """A tiny Qwen3 checkpoint as the hub delivers one: config, safetensors weights, tokenizer."""
    tokenizer = word_tokenizer()
    model = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=8,
                                             num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                             intermediate_size=64), tokenizer, seed=0)
    path = tmp_path / "Qwen3-tiny"
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


def _convert(config, teacher, mixer, out, *inputs):
    return main(["opal-convert", "--config", json.dumps(config), "--teacher", str(teacher), "--mixer", mixer,
                 *map(str, inputs), "--out", str(out / "model"), "--record", str(out / "layers.json")])


def test_paper_config_resolves_a_local_qwen3_and_converts_it_offline(checkpoint, toy_dataset, tmp_path):
    teacher = tmp_path / "teacher"
    config = {"teacher.models.qwen3": {"family": "qwen3", "pretrained": str(checkpoint)},
              "teacher.train": {"steps": 1, "warmup_steps": 0}}
    assert main(["teacher-lm", "--config", json.dumps(config), "--arch", "qwen3", "--data", str(toy_dataset),
                 "--out", str(teacher), "--history", str(tmp_path / "h.csv"), "--metrics", str(tmp_path / "m.json"),
                 "--checkpoints", str(tmp_path / "ckpt")]) == 0
    teacher_model = load_pretrained(str(teacher))
    for out, mixer, expected, config, inputs in (
            ("gdn", "gdn", ["gdn", "gdn", "gdn", "attention"] * 2, GDN, ("--data", toy_dataset)),
            ("swa", "swa", ["swa"] * 8, SWA, ("--layers", tmp_path / "gdn/layers.json")),
            ("swa_hybrid", "swa", ["swa", "swa", "swa", "attention"] * 2, SWA_HYBRID,
             ("--layers", tmp_path / "gdn/layers.json"))):
        out = tmp_path / out
        assert _convert(config, teacher, mixer, out, *inputs) == 0
        hybrid = load_pretrained(str(out / "model"))
        assert hybrid.config.mixer_types == expected and (out / "model/tokenizer.json").is_file()
        record = json.loads((out / "layers.json").read_text())
        assert record["kept"] == [i for i, t in enumerate(expected) if t == "attention"]
        assert len(record["conversion_kl"]) == 8
        # every layer keeps the teacher's q projection: attention as it was, SWA with the same weights
        kept = hybrid.model.layers[3].self_attn.q_proj.weight
        assert kept.equal(teacher_model.model.layers[3].self_attn.q_proj.weight)


def test_the_hybrid_swa_layout_without_the_gdn_layers_is_one_clear_error(checkpoint, tmp_path, capsys):
    assert _convert(SWA_HYBRID, checkpoint, "swa", tmp_path / "swa") != 0
    assert "opal.swa.layout: all" in capsys.readouterr().err
    assert not (tmp_path / "swa").exists()


def test_kl_guided_keeps_the_layer_whose_conversion_costs_the_most(toy_dataset, tmp_path):
    """A teacher whose layers differ by construction: every attention output but layer 2's is zero, so converting
    any other layer leaves the logits as they are and only layer 2's conversion moves them."""
    import torch

    teacher = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4,
                                               num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                               intermediate_size=64, initializer_range=0.2), word_tokenizer(),
                            seed=0)
    with torch.no_grad():
        for i, layer in enumerate(teacher.model.layers):
            if i != 2:
                layer.self_attn.o_proj.weight.zero_()
    teacher.save_pretrained(tmp_path / "teacher")
    word_tokenizer().save_pretrained(tmp_path / "teacher")
    config = {**GDN, "opal.layer_selection": "kl_guided"}
    assert _convert(config, tmp_path / "teacher", "gdn", tmp_path / "gdn", "--data", toy_dataset) == 0
    record = json.loads((tmp_path / "gdn/layers.json").read_text())
    scores = record["conversion_kl"]
    assert record["kept"] == [2] and scores[2] > 0 and max(scores[:2] + scores[3:]) < 1e-6 * scores[2], scores
    hybrid = load_pretrained(str(tmp_path / "gdn/model"))
    assert hybrid.config.mixer_types == ["gdn", "gdn", "attention", "gdn"]
    # A selection variant chooses from these scores (no data to read), here every_n's layer 3
    scored = tmp_path / "gdn/layers.json"
    assert _convert(GDN, tmp_path / "teacher", "gdn", tmp_path / "every_n", "--layers", scored) == 0
    variant = json.loads((tmp_path / "every_n/layers.json").read_text())
    assert variant == {"selection": "every_n", "kept": [3], "conversion_kl": scores}


def test_a_teacher_too_shallow_for_the_pattern_is_one_line(checkpoint, toy_dataset, tmp_path, capsys):
    opal = {**GDN, "opal.layer_selection": "explicit", "opal.attention_layers": [9]}
    assert _convert(opal, checkpoint, "gdn", tmp_path / "x", "--data", toy_dataset) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1 and "kept attention layers [9]: expected at least one index in [0, 8)" in errors[0]
    assert not (tmp_path / "x").exists()


def test_a_checkpoint_with_another_tokenizer_than_the_data_is_refused_in_one_line(toy_dataset, tmp_path, capsys):
    """A BPE checkpoint (Qwen's special tokens, a vocabulary at least as large as the word tokenizer's, so the
    vocabulary-size check alone would pass) against data tokenized by the word tokenizer: conversion and
    evaluation both stop before reading a row, naming the two tokenizers."""
    from ..fake_hub import bpe_tokenizer

    bpe = bpe_tokenizer("qwen")
    assert len(bpe) >= len(word_tokenizer())
    model = build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, num_hidden_layers=4,
                                             num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                             intermediate_size=64), bpe, seed=0)
    model.save_pretrained(tmp_path / "bpe")
    bpe.save_pretrained(tmp_path / "bpe")
    capsys.readouterr()
    assert _convert(GDN, tmp_path / "bpe", "gdn", tmp_path / "gdn", "--data", toy_dataset) == 2
    eval_config = json.dumps({"eval": {"batch_size": 4, "max_new_tokens": 8}})
    assert main(["eval-lm", "--config", eval_config, "--model", str(tmp_path / "bpe"), "--data", str(toy_dataset),
                 "--name", "bpe", "--out", str(tmp_path / "eval/metrics.json"), "--by-length",
                 str(tmp_path / "eval/by_length.csv"), "--items", str(tmp_path / "eval/items.csv")]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 2 and all("is not the one data" in e and f"{len(bpe)} tokens" in e for e in errors)
    assert not (tmp_path / "gdn").exists() and not (tmp_path / "eval").exists()


def test_a_model_saved_without_its_tokenizer_is_refused_in_one_line(toy_dataset, tmp_path):
    from relin.data.tokenizer import check_same_tokenizer
    from relin.errors import InputError

    build_teacher(TeacherModelConfig(family="qwen3", hidden_size=32, head_dim=8), word_tokenizer()).save_pretrained(
        tmp_path / "bare")
    with pytest.raises(InputError, match="saved without its tokenizer") as err:
        check_same_tokenizer(word_tokenizer(), toy_dataset, tmp_path / "bare")
    assert "\n" not in str(err.value)


def _export(model_dir, out):
    return main(["opal-export", "--config", "{}", "--model", str(model_dir), "--out", str(out / "model"),
                 "--record", str(out / "export.json")])


def test_export_writes_a_stock_checkpoint_of_the_converted_hybrid(checkpoint, toy_dataset, tmp_path):
    config = {**GDN, "opal.gdn": {**GDN["opal.gdn"], "qk_norm": False}}
    assert _convert(config, checkpoint, "gdn", tmp_path / "gdn", "--data", toy_dataset) == 0
    out = tmp_path / "export"
    assert _export(tmp_path / "gdn/model", out) == 0
    record = json.loads((out / "export.json").read_text())
    assert record["model_type"] == "qwen3_5_text" and record["max_abs_logit_difference"] <= 1e-4
    assert record["layer_types"] == ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 3 + \
        ["full_attention"]
    assert (out / "model/tokenizer.json").is_file() and (out / "model/model.safetensors").is_file()


def test_export_names_what_it_cannot_map_in_one_line_and_writes_nothing(tmp_path, capsys):
    from relin.models.hybrid import HybridConfig, HybridForCausalLM

    tokenizer = word_tokenizer()
    config = HybridConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=2, head_dim=16, mixer_types=["gdn", "attention"],
                          gdn={"qk_norm": True})
    HybridForCausalLM(config).save_pretrained(tmp_path / "hybrid")
    tokenizer.save_pretrained(tmp_path / "hybrid")
    capsys.readouterr()
    assert _export(tmp_path / "hybrid", tmp_path / "export") != 0
    errors = [line for line in capsys.readouterr().err.splitlines() if "qwen3_5_text" in line]
    assert len(errors) == 1 and "gdn.qk_norm" in errors[0]
    assert not (tmp_path / "export").exists()
