"""The root of ``params.yaml`` and its loading: files and overlays deep-merged, built strictly, and
the sections one stage reads (:class:`Sections`).

Only the workflow's entry points (the Snakefile, ``relin check-config``, ``relin schema``) and the
CLI build the root: a stage module imports just the area modules of the sections it reads, so its
code dependencies, and DVC's reruns, follow the areas it uses.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from .corpus import CorpusConfig
from .data import DataConfig
from .eval import EvalConfig
from .hedgemamba import HedgeMambaConfig
from .lia_mtr import LiaMtrConfig
from .loader import ConfigError, build, option
from .opal import OpalConfig
from .report import ReportConfig
from .teacher import TeacherConfig
from .tracking import TrackingConfig


@dataclass(kw_only=True)
class Params:
    """Root of ``params.yaml``."""

    seed: int = option(0, "global seed")
    seeds: list[int] = option([0], "training seeds of the student stages (OPAL's stages and controls, HedgeMamba's "
                                   "stages and controls, LIA-MTR's bridges), each replacing their train.seed: the "
                                   "first trains the models as named, every further seed s a replica <name>-s<s>; "
                                   "with several, the report's intervals cover training noise too")
    gpus_per_job: int = option(1, "processes (one GPU each) every training job runs on: above 1 the rule launches it "
                                  "with torchrun on one node (ZeRO-2 with train.backend deepspeed) and asks the "
                                  "scheduler for that many GPUs", minimum=1)
    tracking: TrackingConfig = option(default_factory=TrackingConfig, help="MLflow tracking")
    data: DataConfig = option(default_factory=DataConfig, help="synthetic text data")
    corpus: CorpusConfig = option(default_factory=CorpusConfig, help="a text corpus from local files")
    teacher: TeacherConfig = option(default_factory=TeacherConfig, help="teacher language models")
    eval: EvalConfig = option(default_factory=EvalConfig, help="language-model evaluation")
    report: ReportConfig = option(default_factory=ReportConfig, help="report")
    opal: OpalConfig = option(default_factory=OpalConfig, help="OPAL: attention -> Gated DeltaNet hybrids")
    lia_mtr: LiaMtrConfig = option(default_factory=LiaMtrConfig, help="LIA-MTR: the vision-language bridge")
    hedgemamba: HedgeMambaConfig = option(default_factory=HedgeMambaConfig,
                                          help="HedgeMamba: attention -> Hedgehog -> Mamba distillation")

    def validate(self, prefix: str) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds) or min(self.seeds) < 0:
            raise ConfigError(f"seeds: expected distinct non-negative integers, at least one, got {self.seeds}")
        teacher = self.opal.teacher
        if teacher not in self.teacher.archs:
            raise ConfigError(f"opal.teacher: {teacher!r} is not trained (expected one of teacher.archs: "
                              f"{', '.join(self.teacher.archs)})")
        model = self.teacher.models[teacher]
        if model.family != "qwen3":
            raise ConfigError(f"opal.teacher: expected a qwen3-family teacher, got {teacher!r} ({model.family})")
        layers = model.num_hidden_layers
        if self.opal.layer_selection == "explicit":
            kept, key = self.opal.attention_layers, "opal.attention_layers"
        else:
            kept, key = [i for i in range(layers) if (i + 1) % self.opal.keep_every == 0], "opal.keep_every"
        if not kept or max(kept) >= layers or min(kept) < 0:
            raise ConfigError(f"{key}: teacher.models.{teacher} has {layers} layers, so attention layers {kept} leave "
                              f"nothing to keep or fall outside [0, {layers})")
        hedgemamba = self.hedgemamba.teacher
        if hedgemamba not in self.teacher.archs:
            raise ConfigError(f"hedgemamba.teacher: {hedgemamba!r} is not trained (expected one of teacher.archs: "
                              f"{', '.join(self.teacher.archs)})")
        if self.teacher.models[hedgemamba].family != "gpt_neox":
            raise ConfigError(f"hedgemamba.teacher: expected a gpt_neox-family teacher, got {hedgemamba!r} "
                              f"({self.teacher.models[hedgemamba].family})")
        for paper, section in (("opal", self.opal), ("hedgemamba", self.hedgemamba)):
            if section.train_data != "corpus":
                continue
            if not self.corpus.files:
                raise ConfigError(f"{paper}.train_data: corpus selected but corpus.files is empty (expected the "
                                  f"local .jsonl or .parquet files to train on)")
            if not self.teacher.models[section.teacher].pretrained:
                raise ConfigError(f"{paper}.train_data: a corpus is tokenized by a pretrained teacher's tokenizer; "
                                  f"teacher.models.{section.teacher} is trained in the DAG on the word tokenizer "
                                  f"(set its pretrained, or train_data: synth_text)")


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
    from .loader import typed_strings

    return typed_strings(Params, dict(overrides))


class Sections:
    """The config sections one stage reads, by dotted path (``teacher.train``), each built as the type
    the stage declares for it (``SECTIONS(args)`` of a stage module: ``{path: config class}``).

    A stage's Snakemake rule passes exactly those sections (as JSON), so a change anywhere else
    neither reruns it nor reaches it. Reading an undeclared section is an error, never a default.
    """

    def __init__(self, raw: dict[str, Any], types: dict[str, type]):
        self.raw, self.types = raw, types

    @classmethod
    def from_params_file(cls, paths: list[str], types: dict[str, type]) -> "Sections":
        from .loader import as_dict

        full = as_dict(load_params(paths[0], paths[1:]))  # validates the whole file
        return cls({key: lookup(full, key) for key in types}, types)

    def get(self, dotted: str) -> Any:
        if dotted not in self.types or dotted not in self.raw:
            raise ConfigError(f"{dotted}: this stage did not declare the config section it reads "
                              f"(declared: {', '.join(self.types)})")
        from .loader import convert

        return convert(self.types[dotted], self.raw[dotted], dotted)


def lookup(mapping: dict, dotted: str) -> Any:
    """The value at a dotted path of a plain config mapping."""
    node: Any = mapping
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ConfigError(f"{dotted}: not found in params (no key {part!r})")
        node = node[part]
    return node

