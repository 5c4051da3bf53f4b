"""relin's typed configuration: one dataclass per component, one-to-one with ``params.yaml`` sections.

``params.yaml`` is the default ("tiny") config; ``workflow/configs/*.yaml`` overlay it (deep merge).
The JSON schema in ``workflow/schemas/params.schema.yaml`` is generated from these classes
(``relin schema``), so the two cannot drift. A variant (another model size, another schedule) is a
named entry in a mapping section, never a new flag.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import yaml

from .configlib import ConfigError, build, option

# --------------------------------------------------------------------------------------- tracking


@dataclass(kw_only=True)
class TrackingConfig:
    """MLflow tracking: one parent run per pipeline invocation, a child run per stage."""

    enabled: bool = option(True, "log params, metrics, artifacts and lineage to MLflow")
    tracking_uri: str = option("sqlite:///mlflow.db", "MLflow backend store (SQLite at the repo root)")
    experiment: str = option("relin", "MLflow experiment name")
    system_metrics: bool = option(True, "sample CPU/GPU/memory metrics during each stage")
    system_metrics_interval: float = option(10.0, "seconds between system-metric samples", exclusive_minimum=0)
    flush_every: int = option(50, "metric points buffered before one batched write", minimum=1)


# ------------------------------------------------------------------------------------------- data


@dataclass(kw_only=True)
class MQARSetting:
    """One multi-query associative-recall setting (Zoology): sequence length and key-value pairs."""

    seq_len: int = option(help="tokens per example including bos (word tokenizer; words for char)", minimum=5)
    num_pairs: int = option(help="key-value pairs per example", minimum=1)
    examples: int = option(help="number of examples", minimum=1)

    def validate(self, prefix: str) -> None:
        if 4 * self.num_pairs > self.seq_len - 1:
            raise ConfigError(f"{prefix}.seq_len: expected >= 4 * num_pairs + 1 = {4 * self.num_pairs + 1} "
                              f"(pairs, then one query and its value per pair), got {self.seq_len}")


@dataclass(kw_only=True)
class MQARConfig:
    """Multi-query associative recall (Zoology's MQAR)."""

    num_keys: int = option(64, "distinct key tokens", minimum=2)
    num_values: int = option(64, "distinct value tokens", minimum=2)
    power_a: float = option(0.01, "power-law exponent of query gaps (Zoology)", exclusive_minimum=0)
    train: list[MQARSetting] = option(default_factory=lambda: [
        MQARSetting(seq_len=64, num_pairs=8, examples=4000)], help="training settings")
    test: list[MQARSetting] = option(default_factory=lambda: [
        MQARSetting(seq_len=64, num_pairs=8, examples=200)], help="test settings")

    def validate(self, prefix: str) -> None:
        for split in ("train", "test"):
            for i, setting in enumerate(getattr(self, split)):
                if setting.num_pairs > min(self.num_keys, self.num_values):
                    raise ConfigError(f"{prefix}.{split}[{i}].num_pairs: expected <= min(num_keys, num_values) = "
                                      f"{min(self.num_keys, self.num_values)} (keys and values are distinct), "
                                      f"got {setting.num_pairs}")


@dataclass(kw_only=True)
class NIAHConfig:
    """Needle-in-a-haystack in the three RULER families (single needle, multi-key, multi-query)."""

    families: list[Literal["single", "multikey", "multiquery"]] = option(
        ["single", "multikey", "multiquery"], "RULER families to generate")
    lengths: list[int] = option([128, 256, 512], "test context lengths in tokens (may exceed training)")
    train_lengths: list[int] = option([128, 256], "training context lengths in tokens (examples cycle through them)")
    depths: list[float] = option([0.0, 0.25, 0.5, 0.75, 1.0], "test needle depths as fractions of the haystack")
    value_digits: int = option(4, "digits of each needle value (RULER uses 7)", minimum=1)
    num_keys: int = option(4, "needles in multi-key (1 queried) / keys queried in multi-query", minimum=2, maximum=16)
    train_examples: int = option(3000, "training examples per family", minimum=0)
    test_examples_per_depth: int = option(10, "test examples per (family, length, depth)", minimum=1)

    def validate(self, prefix: str) -> None:
        for name in ("lengths", "train_lengths"):
            for i, length in enumerate(getattr(self, name)):
                if length < 16:
                    raise ConfigError(f"{prefix}.{name}[{i}]: expected a context length >= 16 tokens, got {length}")
        for i, depth in enumerate(self.depths):
            if not 0.0 <= depth <= 1.0:
                raise ConfigError(f"{prefix}.depths[{i}]: expected a fraction in [0, 1], got {depth}")
        if not self.families:
            raise ConfigError(f"{prefix}.families: expected at least one of single, multikey, multiquery")


@dataclass(kw_only=True)
class ArithmeticConfig:
    """Multi-step arithmetic word problems with a checkable final answer."""

    steps: list[int] = option([1, 2], "numbers of operations per problem (each example draws one)")
    max_operand: int = option(20, "largest operand", minimum=1)
    train_examples: int = option(3000, "training examples", minimum=0)
    test_examples: int = option(200, "test examples", minimum=1)

    def validate(self, prefix: str) -> None:
        if not self.steps or min(self.steps) < 1:
            raise ConfigError(f"{prefix}.steps: expected a non-empty list of integers >= 1, got {self.steps}")


@dataclass(kw_only=True)
class FillerConfig:
    """Filler 'language' for haystacks and perplexity: a small word grammar."""

    vocab_size: int = option(200, "filler words (at most the 200 of the built-in word pool)", minimum=8, maximum=200)
    train_examples: int = option(2000, "training passages", minimum=0)
    test_examples: int = option(100, "held-out passages for perplexity", minimum=1)
    seq_len: int = option(128, "tokens per passage including bos", minimum=8)


@dataclass(kw_only=True)
class DataConfig:
    """Synthetic text tasks (``synth_text``), deterministic by seed, saved as a HF dataset."""

    seed: int = option(0, "data seed")
    tokenizer: Literal["word", "char"] = option("word", "tokenizer the project builds: word or char level")
    mqar: MQARConfig = option(default_factory=MQARConfig, help="multi-query associative recall")
    niah: NIAHConfig = option(default_factory=NIAHConfig, help="needle in a haystack (RULER families)")
    arithmetic: ArithmeticConfig = option(default_factory=ArithmeticConfig, help="arithmetic word problems")
    filler: FillerConfig = option(default_factory=FillerConfig, help="filler language")


# ---------------------------------------------------------------------------------------- models


@dataclass(kw_only=True)
class TeacherModelConfig:
    """A teacher transformer built from a transformers config (or loaded by id/path)."""

    family: Literal["qwen3", "gpt_neox"] = option(help="transformers architecture")
    hidden_size: int = option(128, "model width", minimum=8)
    num_hidden_layers: int = option(2, "decoder layers", minimum=1)
    num_attention_heads: int = option(4, "query heads", minimum=1)
    num_key_value_heads: int = option(4, "key/value heads (GQA; Qwen3 only)", minimum=1)
    head_dim: int = option(32, "per-head width (Qwen3 only; GPT-NeoX uses hidden/heads)", minimum=4)
    intermediate_size: int = option(384, "MLP width", minimum=8)
    rotary_pct: float = option(0.25, "fraction of head dims with RoPE (GPT-NeoX only)", minimum=0, maximum=1)
    rope_theta: float = option(10000.0, "RoPE base", exclusive_minimum=0)
    max_position_embeddings: int = option(1024, "longest position", minimum=8)
    initializer_range: float = option(0.02, "std of the normal initialisation of every weight matrix; without "
                                            "Qwen3's q/k norms, 0.02 leaves GPT-NeoX's attention logits near 0 "
                                            "and tiny models then never learn MQAR", exclusive_minimum=0)
    pretrained: str = option("", "Hugging Face id or local path to load instead of building "
                                 "(empty = build from this config and train)")

    def validate(self, prefix: str) -> None:
        if self.num_attention_heads % self.num_key_value_heads:
            raise ConfigError(f"{prefix}.num_key_value_heads: expected a divisor of num_attention_heads "
                              f"({self.num_attention_heads}), got {self.num_key_value_heads}")
        if self.family == "gpt_neox" and self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"{prefix}.hidden_size: expected a multiple of num_attention_heads for GPT-NeoX")


# -------------------------------------------------------------------------------------- training


@dataclass(kw_only=True)
class CurriculumStage:
    """One stage of a length/difficulty curriculum: until ``until_step``, train on examples up to ``max_len``."""

    until_step: int = option(help="last optimizer step of this stage", minimum=1)
    max_len: int = option(help="longest training example (tokens) in this stage", minimum=4)


@dataclass(kw_only=True)
class TrainConfig:
    """The one training loop: optimizer, schedule, batching, checkpoints and backend."""

    steps: int = option(1000, "optimizer steps", minimum=1)
    batch_size: int = option(32, "sequences per micro-batch (per process)", minimum=1)
    grad_accum: int = option(1, "micro-batches per optimizer step", minimum=1)
    lr: float = option(1e-3, "peak learning rate", exclusive_minimum=0)
    min_lr_ratio: float = option(0.1, "final lr as a fraction of peak", minimum=0, maximum=1)
    weight_decay: float = option(0.0, "AdamW weight decay", minimum=0)
    betas: list[float] = option([0.9, 0.95], "AdamW betas")
    schedule: Literal["cosine", "wsd", "constant"] = option("cosine", "warmup+cosine, warmup-stable-decay, or constant")
    warmup_steps: int = option(50, "linear warmup steps", minimum=0)
    decay_fraction: float = option(0.2, "WSD: fraction of steps in the final decay", minimum=0, maximum=1)
    clip_grad_norm: float = option(1.0, "gradient clipping max norm (0 = off)", minimum=0)
    checkpoint_every: int = option(200, "steps between resumable checkpoints", minimum=1)
    log_every: int = option(10, "steps between logged metrics", minimum=1)
    backend: Literal["torch", "deepspeed"] = option("torch", "plain PyTorch or DeepSpeed ZeRO-2")
    precision: Literal["auto", "fp32", "bf16"] = option("auto", "auto = bf16 on GPU, fp32 on CPU")
    seed: int = option(0, "training seed (init, batch order)")
    curriculum: list[CurriculumStage] = option([], "length curriculum (empty = full length throughout)")
    task_weights: dict[str, float] = option({}, "mixture weight per data task: its share of drawn rows, "
                                                "whatever its row count (unlisted weigh 1; 0 leaves it out; "
                                                "empty = rows drawn uniformly)")
    bucket_by_length: bool = option(True, "draw each step's rows from one length bucket (next power of two) "
                                          "so short rows are not padded to the longest")

    def validate(self, prefix: str) -> None:
        negative = [task for task, weight in self.task_weights.items() if weight < 0]
        if negative:
            raise ConfigError(f"{prefix}.task_weights: expected weights >= 0, got a negative one for "
                              f"{', '.join(negative)}")
        if self.warmup_steps > self.steps:
            raise ConfigError(f"{prefix}.warmup_steps: expected <= steps ({self.steps}), got {self.warmup_steps}")
        for i, (before, stage) in enumerate(zip(self.curriculum, self.curriculum[1:]), start=1):
            if stage.until_step <= before.until_step:
                raise ConfigError(f"{prefix}.curriculum[{i}].until_step: expected > {before.until_step} "
                                  f"(stages in step order), got {stage.until_step}")
            if stage.max_len < before.max_len:
                raise ConfigError(f"{prefix}.curriculum[{i}].max_len: expected >= {before.max_len} "
                                  f"(a length curriculum never shortens), got {stage.max_len}")


@dataclass(kw_only=True)
class TeacherConfig:
    """Teachers: which architectures the DAG trains, their named model configs, and their training."""

    archs: list[str] = option(["qwen3", "gpt_neox"], "architectures to train (keys of ``models``)")
    models: dict[str, TeacherModelConfig] = option(default_factory=lambda: {
        "qwen3": TeacherModelConfig(family="qwen3"),
        "gpt_neox": TeacherModelConfig(family="gpt_neox")}, help="named teacher model configs")
    train: TrainConfig = option(default_factory=TrainConfig, help="teacher training")

    def validate(self, prefix: str) -> None:
        if not self.archs:
            raise ConfigError(f"{prefix}.archs: expected at least one of: {', '.join(self.models)}")
        for arch in self.archs:
            if arch not in self.models:
                raise ConfigError(f"{prefix}.archs: {arch!r} is not a key of {prefix}.models "
                                  f"(expected one of: {', '.join(self.models)})")


# ------------------------------------------------------------------------------------ evaluation


@dataclass(kw_only=True)
class EvalConfig:
    """Evaluation of language models: perplexity and accuracy per task family and context length."""

    batch_size: int = option(32, "sequences per evaluation batch", minimum=1)
    max_new_tokens: int = option(32, "greedy tokens generated for NIAH and arithmetic answers "
                                     "(at least the longest gold answer)", minimum=1)


@dataclass(kw_only=True)
class ReportConfig:
    """The HTML/Markdown report built from stage outputs."""

    title: str = option("relin report", "report title")


# ------------------------------------------------------------------------------------------- root


@dataclass(kw_only=True)
class Params:
    """Root of ``params.yaml``."""

    seed: int = option(0, "global seed")
    tracking: TrackingConfig = option(default_factory=TrackingConfig, help="MLflow tracking")
    data: DataConfig = option(default_factory=DataConfig, help="synthetic text data")
    teacher: TeacherConfig = option(default_factory=TeacherConfig, help="teacher language models")
    eval: EvalConfig = option(default_factory=EvalConfig, help="language-model evaluation")
    report: ReportConfig = option(default_factory=ReportConfig, help="report")


def deep_merge(base: dict, overlay: dict) -> dict:
    """``overlay`` over ``base``: mappings merge key by key, everything else is replaced."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def read_yaml(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found (expected a YAML file, e.g. params.yaml)")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{where} not valid YAML ({getattr(err, 'problem', err)})") from None
    if data is None:
        raise ConfigError(f"{path}: empty (expected a mapping of config sections, e.g. `teacher: ...`)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config sections at the top level")
    return data


def load_layers(layers: list[tuple[str, dict]], check: Callable[[Params], None] | None = None) -> Params:
    """Build the config of ``layers`` (``(name, mapping)``, deep-merged in order), strictly, then run
    ``check`` (rules across sections, e.g. :func:`relin.preflight.check`) on it.

    An error names the layer that introduced it: the first prefix of the layers that fails with
    the same message (``smoke.yaml: teacher.train.stepz: unknown key``), so an overlay's typo is
    never blamed on ``params.yaml``.
    """
    def load(mapping: dict) -> Params:
        params = build(Params, mapping)
        if check is not None:
            check(params)
        return params

    merged: dict = {}
    prefixes = []
    for name, data in layers:
        merged = deep_merge(merged, data)
        prefixes.append((name, merged))
    try:
        return load(merged)
    except ConfigError as err:
        message = str(err)
    for name, partial in prefixes:
        try:
            load(partial)
        except ConfigError as err:
            if str(err) == message:
                raise ConfigError(f"{name}: {message}") from None
    raise ConfigError(f"{' + '.join(name for name, _ in layers)}: {message}")


def load_params(path: str | Path = "params.yaml", overlays: list[str | Path] = (),
                check: Callable[[Params], None] | None = None) -> Params:
    """Read ``params.yaml`` and overlays, and build the typed config (strict; see :func:`load_layers`)."""
    return load_layers([(str(p), read_yaml(p)) for p in (path, *overlays)], check)


def typed_overrides(overrides: dict[str, Any]) -> dict[str, Any]:
    """Command-line overrides (Snakemake's ``--config``) with their values read as the declared types."""
    from .configlib import typed_strings

    return typed_strings(Params, dict(overrides))


class Sections:
    """The config sections one stage reads, addressed by dotted path (``teacher.train``).

    A stage declares the sections it depends on; its Snakemake rule passes exactly those (as JSON),
    so a change anywhere else neither reruns it nor reaches it. Reading an undeclared section is an
    error, never a silent default.
    """

    def __init__(self, raw: dict[str, Any]):
        self.raw = raw

    @classmethod
    def from_params_file(cls, paths: list[str], wanted: list[str]) -> "Sections":
        params = load_params(paths[0], paths[1:])  # validates the whole file
        from .configlib import as_dict
        full = as_dict(params)
        return cls({key: _lookup(full, key) for key in wanted})

    def get(self, dotted: str) -> Any:
        if dotted not in self.raw:
            raise ConfigError(f"{dotted}: this stage did not declare the config section it reads "
                              f"(declared: {', '.join(self.raw)})")
        from .configlib import convert, section_type
        return convert(section_type(Params, dotted), self.raw[dotted], dotted)


def _lookup(mapping: dict, dotted: str) -> Any:
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"{dotted}: not found in params (no key {part!r})")
        node = node[part]
    return node


def lookup(mapping: dict, dotted: str) -> Any:
    """The value at a dotted path of a plain config mapping."""
    return _lookup(mapping, dotted)
