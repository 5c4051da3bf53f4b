"""Validation before any work: typed values, rules across fields and sections, and error lines that
name the file (or ``--config``) that introduced the mistake."""
import pytest
import yaml

from relin.config.params import load_layers, load_params, typed_overrides
from relin.errors import ConfigError
from relin.preflight import check

from ..workflow.conftest import ROOT

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.mark.parametrize("overlay, message", [
    ({"teacher": {"train": {"lr": float("nan")}}}, "teacher.train.lr: expected a finite number, got nan"),
    ({"teacher": {"train": {"lr": float("inf")}}}, "teacher.train.lr: expected a finite number, got inf"),
    ({"teacher": {"train": {"steps": 40, "warmup_steps": 50}}}, "teacher.train.warmup_steps: expected <= steps (40)"),
    ({"teacher": {"train": {"curriculum": [{"until_step": 200, "max_len": 64}, {"until_step": 100, "max_len": 128}]}}},
     "teacher.train.curriculum[1].until_step: expected > 200"),
    ({"teacher": {"train": {"curriculum": [{"until_step": 100, "max_len": 128}, {"until_step": 200, "max_len": 64}]}}},
     "teacher.train.curriculum[1].max_len: expected >= 128"),
    ({"teacher": {"archs": []}}, "teacher.archs: expected at least one of: qwen3, gpt_neox"),
    ({"eval": {"max_new_tokens": 1}}, "eval.max_new_tokens: 1 cannot hold the longest niah_single answer (5 tokens)"),
    ({"eval": {"max_new_tokens": 20}}, "eval.max_new_tokens: 20 cannot hold the longest niah_multiquery answer (23"),
    ({"lia_mtr": {"tower": {"select_layer": -5}}}, "lia_mtr.tower.select_layer: the tower has 4 hidden states"),
    ({"lia_mtr": {"tower": {"select_layer": 4}}}, "lia_mtr.tower.select_layer: the tower has 4 hidden states"),
    ({"lia_mtr": {"data": {"image_size": 30}}}, "lia_mtr.data.image_size: expected a multiple of "
                                                "lia_mtr.tower.patch_size (4), got 30"),
    ({"opal": {"align": {"train": {"gradient_checkpointing": True}}}},
     "opal.align.train.gradient_checkpointing: stage 1 feeds each GDN layer the teacher's layer inputs"),
], ids=["nan", "inf", "warmup > steps", "curriculum steps decrease", "curriculum shortens", "no teacher",
        "max_new_tokens 1", "max_new_tokens < multiquery", "select_layer below", "select_layer above",
        "image_size vs patch_size", "checkpointing in stage 1"])
def test_bad_value_is_one_line_naming_the_layer_and_key(overlay, message):
    with pytest.raises(ConfigError) as err:
        load_layers([("params.yaml", PARAMS), ("bad.yaml", overlay)], check)
    assert str(err.value).startswith(f"bad.yaml: {message}") and "\n" not in str(err.value)


def test_an_error_already_in_params_is_blamed_on_params():
    broken = {**PARAMS, "eval": {"batch_size": 0}}
    with pytest.raises(ConfigError, match=r"^params.yaml: eval.batch_size: expected a value >= 1"):
        load_layers([("params.yaml", broken), ("smoke.yaml", {"report": {"title": "x"}})], check)


def test_overlay_typo_names_the_overlay_file(tmp_path):
    overlay = tmp_path / "mine.yaml"
    overlay.write_text("teacher:\n  train:\n    stepz: 3\n")
    with pytest.raises(ConfigError, match=rf"^{overlay}: teacher.train.stepz: unknown key"):
        load_params(ROOT / "params.yaml", [overlay])


def test_empty_file_is_an_error(tmp_path):
    empty = tmp_path / "params.yaml"
    empty.write_text("# nothing here\n")
    with pytest.raises(ConfigError, match=r"empty \(expected a mapping of config sections"):
        load_params(empty)


def test_command_line_overrides_get_their_declared_types():
    # what Snakemake's --config 'teacher={train: {lr: 0.003, betas: [0.9, 0.99], schedule: wsd}}' passes
    raw = {"teacher": {"train": {"lr": "0.003", "betas": ["0.9", "0.99"], "schedule": "wsd",
                                 "bucket_by_length": "false"},
                       "archs": ["qwen3"]}, "report": {"title": "123"}}
    typed = typed_overrides(raw)
    assert typed == {"teacher": {"train": {"lr": 0.003, "betas": [0.9, 0.99], "schedule": "wsd",
                                           "bucket_by_length": False}, "archs": ["qwen3"]},
                     "report": {"title": "123"}}
    with pytest.raises(ConfigError, match=r"^--config: teacher.train.lr: expected a number, got 'fast'"):
        load_layers([("params.yaml", PARAMS), ("--config", typed_overrides({"teacher": {"train": {"lr": "fast"}}}))])


@pytest.mark.parametrize("family, key, value", [("qwen3", "rotary_pct", 0.5), ("gpt_neox", "num_key_value_heads", 2),
                                                 ("gpt_neox", "head_dim", 16)])
def test_a_teacher_option_its_architecture_ignores_is_one_clear_error(family, key, value):
    from relin.config.loader import build
    from relin.config.teacher import TeacherModelConfig

    with pytest.raises(ConfigError, match=f"teacher.models.x.{key}: a {family} teacher has no such option") as err:
        build(TeacherModelConfig, {"family": family, key: value}, "teacher.models.x")
    assert len(str(err.value).splitlines()) == 1
    assert build(TeacherModelConfig, {"family": "gpt_neox"}, "t").rotary_fraction == 0.25, "Pythia's by default"
