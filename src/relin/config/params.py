"""The root of ``params.yaml`` and its loading: files and overlays deep-merged, built strictly, and
the sections one stage reads (:class:`Sections`).

Only the workflow's entry points (the Snakefile, ``relin check-config``, ``relin schema``) and the
CLI build the root: a stage module imports just the area modules of the sections it reads, so its
code dependencies, and DVC's reruns, follow the areas it uses.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, get_args, get_origin

import yaml

from .checkpoints import PackagedCheckpointConfig, default_checkpoints
from .corpus import CorpusConfig
from .data import DataConfig
from .eval import EvalConfig
from .hedgemamba import HedgeMambaConfig, stage_rows
from .lia_mtr import LiaMtrConfig
from .loader import ConfigError, _check_bounds, _type_hints, build, convert, option
from .opal import NIAH_TASKS, OpalConfig
from .prose import ProseConfig
from .real_text import BpeConfig, RealTextConfig
from .report import ReportConfig
from .teacher import TeacherConfig
from .tracking import TrackingConfig
from .train import TrainConfig

# The tasks of the synthetic rows (each row's ``task``), in the order synth_text generates them (relin.data.*), and
# of a corpus's rows (relin.data.corpus.TASK): the names task_weights and prompt_tasks may give. They live here, not
# in the data config, so that checking them reruns no stage.
TASKS = ("mqar", "niah_single", "niah_multikey", "niah_multiquery", "arithmetic", "walk", "list_copy", "list_reverse",
         "digit_copy", "filler", "text")
CORPUS_TASK = "corpus"
# The teacher families each conversion copies (relin.models.convert.opal / .hedgemamba CONVERTIBLE).
OPAL_FAMILIES = ("qwen3", "llama")
HEDGEMAMBA_FAMILIES = ("gpt_neox", "llama")
# The GDN options opal_export (a target of every full DAG run: rule all) needs, each with the reason
# relin.models.export.qwen3_5.export_problems refuses another value: Qwen3.5's Gated DeltaNet has no counterpart.
EXPORTABLE_GDN = {
    "qk_norm": (False, "Qwen3.5's GDN has no q/k RMSNorm before the L2 norm"),
    "allow_neg_eigval": (False, "Qwen3.5's β = σ(b) lies in (0, 1)"),
    "conv_activation": ("silu", "Qwen3.5's short convolution applies SiLU"),
}


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
    real_text: RealTextConfig = option(default_factory=RealTextConfig,
                                       help="a real-text corpus every install has: a pinned release's Python files")
    prose: ProseConfig = option(default_factory=ProseConfig, help="a prose corpus from pinned npm tarballs (State of "
                                                                  "the Union, Moby-Dick), in real_text's format")
    bpe: BpeConfig = option(default_factory=BpeConfig, help="the byte-level BPE learnt on the real-text corpus")
    checkpoints: dict[str, PackagedCheckpointConfig] = option(
        default_factory=default_checkpoints, help="pretrained models shipped inside installed registry packages, by "
                                                  "name (relin pretrained-checkpoint; teacher.models.*.checkpoint)")
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
        for key, seeds in (("opal.seeds", self.opal.seeds), ("hedgemamba.seeds", self.hedgemamba.seeds),
                           ("lia_mtr.seeds", self.lia_mtr.seeds), ("lia_mtr.niah.seeds", self.lia_mtr.niah.seeds)):
            if seeds and (len(set(seeds)) != len(seeds) or min(seeds) < 0 or seeds[0] != self.seeds[0]):
                raise ConfigError(f"{key}: expected distinct non-negative integers starting with seeds' first "
                                  f"({self.seeds[0]}: its models carry no suffix), got {seeds}")
        teacher = self.opal.teacher
        if teacher not in self.teacher.archs:
            raise ConfigError(f"opal.teacher: {teacher!r} is not trained (expected one of teacher.archs: "
                              f"{', '.join(self.teacher.archs)})")
        model = self.teacher.models[teacher]
        if model.family not in OPAL_FAMILIES:
            raise ConfigError(f"opal.teacher: expected a {' or '.join(OPAL_FAMILIES)}-family teacher, got {teacher!r} "
                              f"({model.family})")
        self._check_kept_layers(model.num_hidden_layers)
        for key, (needed, reason) in EXPORTABLE_GDN.items():
            if (value := getattr(self.opal.gdn, key)) != needed:
                raise ConfigError(f"opal.gdn.{key}: {_yaml(value)} cannot be exported by opal_export, the last stage "
                                  f"of OPAL's chain ({reason}); expected {_yaml(needed)}")
        hedgemamba = self.hedgemamba.teacher
        if hedgemamba not in self.teacher.archs:
            raise ConfigError(f"hedgemamba.teacher: {hedgemamba!r} is not trained (expected one of teacher.archs: "
                              f"{', '.join(self.teacher.archs)})")
        if self.teacher.models[hedgemamba].family not in HEDGEMAMBA_FAMILIES:
            raise ConfigError(f"hedgemamba.teacher: expected a {' or '.join(HEDGEMAMBA_FAMILIES)}-family teacher, got "
                              f"{hedgemamba!r} ({self.teacher.models[hedgemamba].family})")
        match, finetune = self.hedgemamba.match.train, self.hedgemamba.finetune.train
        rows = stage_rows(match, finetune)
        if rows % finetune.steps:
            # the controls built from the teacher read HedgeMamba's rows in its number of updates (arm_budget)
            raise ConfigError(f"hedgemamba.finetune.train.steps: the controls built from the teacher read stage 1's "
                              f"and stage 2's {rows} rows in {finetune.steps} equal updates, and {finetune.steps} "
                              f"does not divide {rows}; expected a step count or batch sizes that split them evenly")
        # a checkpoints row per model that loads one, with the format its role reads: a causal LM or a vision tower
        teachers = self.teacher.models.items()
        loaders = [*((f"teacher.models.{name}", model.checkpoint, "gguf") for name, model in teachers),
                   ("lia_mtr.llm", self.lia_mtr.llm.checkpoint, "gguf"),
                   ("lia_mtr.tower", self.lia_mtr.tower.checkpoint, "onnx_dinov2")]
        for key, row, fmt in loaders:
            if row and row not in self.checkpoints:
                raise ConfigError(f"{key}.checkpoint: {row!r} is not a row of checkpoints "
                                  f"(expected one of: {', '.join(self.checkpoints) or 'none defined'})")
            if row and self.checkpoints[row].format != fmt:
                rows = ", ".join(name for name, c in self.checkpoints.items() if c.format == fmt)
                raise ConfigError(f"{key}.checkpoint: {row!r} is a {self.checkpoints[row].format} row; expected a "
                                  f"{fmt} row (one of: {rows})")
        text_tokenizer = self.data.tokenizer == "bpe" or all(
            self.teacher.models[arch].loaded for arch in self.teacher.archs)
        if not text_tokenizer and "text" in self.data.niah.families:
            raise ConfigError(f"data.niah.families: text places its needles in the real-text corpus, which the "
                              f"{self.data.tokenizer} tokenizer over the task words does not read; expected "
                              f"data.tokenizer: bpe (or pretrained teachers), or the family removed")
        if not text_tokenizer and self.data.text.train_examples:
            raise ConfigError(f"data.text.train_examples: real-text rows need a tokenizer learnt on text "
                              f"(data.tokenizer bpe, or a pretrained teacher's), not the {self.data.tokenizer} "
                              f"tokenizer over the task words; expected data.tokenizer: bpe or "
                              f"data.text.train_examples: 0")
        for paper, section in (("opal", self.opal), ("hedgemamba", self.hedgemamba)):
            if section.train_data != "corpus":
                continue
            if not self.corpus.files:
                raise ConfigError(f"{paper}.train_data: corpus selected but corpus.files is empty (expected the "
                                  f"local .jsonl or .parquet files to train on)")
            if not self.teacher.models[section.teacher].loaded:
                raise ConfigError(f"{paper}.train_data: a corpus is tokenized by a pretrained teacher's tokenizer; "
                                  f"teacher.models.{section.teacher} is trained in the DAG on the word tokenizer "
                                  f"(set its pretrained or checkpoint, or train_data: synth_text)")
        # teacher.train trains no teacher when every one of them is loaded: its mixture names the
        # default data's tasks, which a checkpoint's data need not render
        trains_a_teacher = not all(self.teacher.models[arch].loaded for arch in self.teacher.archs)
        for key, train in train_configs(self):
            if key != "teacher.train" or trains_a_teacher:
                self._check_task_weights(key, train)
        self._check_prompt_tasks()

    def _check_kept_layers(self, layers: int) -> None:
        """The layers OPAL's conversions keep as attention: every conversion needs at least one kept and one
        converted layer (stage 1 trains only GDN layers); the kl_guided conversion, always in the DAG, keeps as
        many as keep_every does whatever layer_selection says; the report counts the kept layers."""
        teacher, keep_every = self.opal.teacher, self.opal.keep_every
        every_n = [i for i in range(layers) if (i + 1) % keep_every == 0]
        if layers < 2:
            raise ConfigError(f"opal.teacher: teacher.models.{teacher} has {layers} layer, which cannot both stay "
                              f"attention and be converted to Gated DeltaNet; expected a teacher of 2 layers or more")
        if not every_n:
            raise ConfigError(f"opal.keep_every: {keep_every} keeps none of the {layers} layers of "
                              f"teacher.models.{teacher} (layers i with (i + 1) % keep_every == 0; the kl_guided "
                              f"conversion keeps as many whatever layer_selection is); expected 2 to {layers}")
        if len(every_n) == layers:
            raise ConfigError(f"opal.keep_every: {keep_every} keeps all {layers} layers of teacher.models.{teacher} "
                              f"as attention, leaving no layer to convert to Gated DeltaNet; expected 2 to {layers}")
        if self.opal.layer_selection != "explicit":
            return
        kept = self.opal.attention_layers
        outside = [i for i in kept if not 0 <= i < layers]
        if outside:
            raise ConfigError(f"opal.attention_layers: {outside[0]} is not a layer of teacher.models.{teacher} "
                              f"(expected indices in [0, {layers}))")
        twice = sorted({i for i in kept if kept.count(i) > 1})
        if twice:
            raise ConfigError(f"opal.attention_layers: layer {twice[0]} listed twice in {kept} (expected distinct "
                              f"indices: the report would count it twice when it compares the kl_guided choice)")
        if len(kept) == layers:
            raise ConfigError(f"opal.attention_layers: {kept} keeps all {layers} layers of teacher.models.{teacher} "
                              f"as attention, leaving no layer to convert to Gated DeltaNet; expected fewer")

    def train_tasks(self, source: str) -> list[str]:
        """The tasks of the training rows of ``source`` (``teacher``, ``opal`` or ``hedgemamba``): a paper's
        corpus (``<paper>.train_data: corpus``), else the synthetic tasks the data config generates."""
        if source != "teacher" and getattr(self, source).train_data == "corpus":
            return [CORPUS_TASK]
        data = self.data
        rows = {"mqar": bool(data.mqar.train), "arithmetic": data.arithmetic.train_examples > 0,
                "walk": data.walk.train_examples > 0,
                **{f"list_{op}": data.lists.train_examples > 0 for op in data.lists.ops},
                "digit_copy": data.digit_copy.train_examples > 0,
                "filler": data.filler.train_examples > 0, "text": data.text.train_examples > 0,
                **{f"niah_{family}": data.niah.train_examples > 0 for family in data.niah.families}}
        family = {f"list_{op}": "lists" for op in data.lists.ops} | {f"niah_{f}": "niah" for f in data.niah.families}
        return [task for task in TASKS if rows.get(task) and family.get(task, task) in data.tasks]

    def _held_out(self, source: str) -> tuple[str, ...]:
        return NIAH_TASKS if source == "opal" and self.opal.niah_protocol == "zero_shot" else ()

    def _check_task_weights(self, key: str, train: TrainConfig) -> None:
        """``train.task_weights`` names tasks of the rows its stage draws, and leaves one with a positive weight
        (rows are drawn as :class:`relin.train.batching.StepBatches` weighs them)."""
        weights, source = train.task_weights, ROW_SOURCES.get(key)
        if source is None:
            if weights:
                why = ("it trains on rollouts of opal.onpolicy.prompt_tasks" if key.startswith("opal.") else
                       "its rows carry no task")
                raise ConfigError(f"{key}.task_weights: this stage draws no rows by task ({why}), so task weights "
                                  f"would be ignored; expected {{}}")
            return
        tasks = self.train_tasks(source)
        # a zero weight draws nothing: it may name a known task these rows lack (an overlay cannot delete a key
        # of params.yaml's mixture when it changes the data), never a name no rows carry
        unknown = [task for task, weight in weights.items()
                   if task not in tasks and (weight > 0 or task not in (*TASKS, CORPUS_TASK))]
        if unknown:
            raise ConfigError(f"{key}.task_weights: {unknown[0]!r} is not a task of the rows this stage trains on "
                              f"(expected names from: {', '.join(tasks)}, or a weight of 0)")
        held_out = self._held_out(source)
        if not any(weights.get(task, 1.0) > 0 for task in tasks if task not in held_out):
            also = f"; {', '.join(held_out)} are held out by opal.niah_protocol zero_shot" if held_out else ""
            raise ConfigError(f"{key}.task_weights: leaves no task with a positive weight (tasks: "
                              f"{', '.join(tasks)}{also}); expected a positive weight for one of them")

    def _check_prompt_tasks(self) -> None:
        """``opal.onpolicy.prompt_tasks`` names known tasks; each with a positive weight has rows in OPAL's
        training data to draw prompts from (:class:`relin.train.rollouts.OnPolicyRollouts`)."""
        key, prompts = "opal.onpolicy.prompt_tasks", self.opal.onpolicy.prompt_tasks
        known = [*TASKS, CORPUS_TASK]
        unknown = [task for task in prompts if task not in known]
        if unknown:
            raise ConfigError(f"{key}: unknown task {unknown[0]!r} (expected names from: {', '.join(known)})")
        tasks, held_out = self.train_tasks("opal"), self._held_out("opal")
        missing = [task for task, weight in prompts.items() if weight > 0 and task not in (*tasks, *held_out)]
        if missing:
            raise ConfigError(f"{key}: {missing[0]!r} has a positive weight but OPAL's training data has no rows of "
                              f"it to draw prompts from (expected a weight of 0, or tasks from: {', '.join(tasks)})")


# The rows each training config draws by task (``task_weights``), by dotted key: the teachers' synthetic tasks or a
# paper's training data (``<paper>.train_data``). Every other training config draws no rows by task (OPAL's stage 3
# and its teacher-continuation control roll out prompts; LIA-MTR's rows carry no task).
ROW_SOURCES = {"teacher.train": "teacher", "opal.align.train": "opal", "opal.offpolicy_short.train": "opal",
               "opal.offpolicy_long.train": "opal", "opal.offpolicy_matched.train": "opal",
               "hedgemamba.match.train": "hedgemamba", "hedgemamba.finetune.train": "hedgemamba"}


def train_configs(config: Any, prefix: str = "") -> list[tuple[str, TrainConfig]]:
    """Every :class:`TrainConfig` inside ``config`` (a config dataclass), with its dotted key."""
    found = []
    for f in dataclasses.fields(config):
        value, key = getattr(config, f.name), f"{prefix}.{f.name}" if prefix else f.name
        values = value.items() if isinstance(value, dict) else [(None, value)]
        for entry, item in values:
            where = key if entry is None else f"{key}.{entry}"
            if isinstance(item, TrainConfig):
                found.append((where, item))
            elif dataclasses.is_dataclass(item):
                found += train_configs(item, where)
    return found


def _yaml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def check_values(cls: type, data: Any, prefix: str = "") -> None:
    """Check the keys and values one config layer (a file, an overlay, ``--config``) sets, on their own.

    Unlike :func:`~.loader.build` this needs no complete section (a required key may come from another layer) and
    runs no ``validate``: it catches a bad value a later layer would hide (``steps: many`` under an overlay that
    sets ``steps``), which the merged config never shows. A list replaces the one below it whole, so it is built
    whole.
    """
    where = prefix or "<top level>"
    if data is None:
        return
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a mapping ({cls.__name__}), got {data!r}")
    hints = _type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name, value in data.items():
        key = f"{prefix}.{name}" if prefix else str(name)
        if name not in fields:
            raise ConfigError(f"{key}: unknown key (expected one of: {', '.join(fields)})")
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            check_values(tp, value, key)
        elif get_origin(tp) is dict and dataclasses.is_dataclass(get_args(tp)[1]) and isinstance(value, dict):
            for entry, item in value.items():
                check_values(get_args(tp)[1], item, f"{key}.{entry}")
        else:
            _check_bounds(fields[name].metadata, convert(tp, value, key), key)


def deep_merge(base: dict, overlay: dict) -> dict:
    """``overlay`` over ``base``: mappings merge key by key, everything else is replaced."""
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _describe_yaml(value: Any) -> str:
    return {list: "a list", str: "a string", bool: "true/false", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__)


def _repeated_key(node: yaml.Node, path: str = "", seen_nodes: set[int] | None = None) -> tuple[str, int, int] | None:
    """The first key a mapping of ``node`` (composed YAML) gives twice: its dotted path and both lines. A merge
    key's (``<<: *anchor``) keys may be overridden; only the keys written in the mapping itself count."""
    seen_nodes = set() if seen_nodes is None else seen_nodes
    if id(node) in seen_nodes:  # an alias of a node already read
        return None
    seen_nodes.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            if found := _repeated_key(item, f"{path}[{i}]", seen_nodes):
                return found
    if not isinstance(node, yaml.MappingNode):
        return None
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = f"{path}.{key_node.value}" if path else key_node.value
        if key in seen:
            return key, seen[key], key_node.start_mark.line + 1
        seen[key] = key_node.start_mark.line + 1
        if found := _repeated_key(value_node, key, seen_nodes):
            return found
    return None


def read_yaml(path: str | Path) -> dict:
    """A config file's top-level mapping, read strictly: one line naming the file for a file that is missing, not
    YAML, not a mapping, or that gives a key twice (YAML would keep the last silently)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found (expected a YAML file, e.g. params.yaml)")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else f"not text: {err.reason}"
        raise ConfigError(f"{path}: cannot be read ({reason}); expected a readable YAML file") from None
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            repeated = _repeated_key(node) if node is not None else None
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}:" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{path}:{where} not valid YAML ({problem}; expected a mapping of config sections, "
                          f"indented with spaces)") from None
    if repeated:
        key, first, again = repeated
        raise ConfigError(f"{path}: line {again}: {key} given twice (first at line {first}); expected each key once "
                          f"(YAML would keep the last silently)")
    if data is None:
        raise ConfigError(f"{path}: empty (expected a mapping of config sections, e.g. `teacher: ...`)")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: {_describe_yaml(data)} at the top level (expected a mapping of config sections, "
                          f"e.g. `teacher: ...`)")
    return data


def load_layers(layers: list[tuple[str, dict]], check: Callable[[Params], None] | None = None) -> Params:
    """Build the config of ``layers`` (``(name, mapping)``, deep-merged in order), strictly, then run
    ``check`` (rules across sections, e.g. :func:`relin.pipeline.preflight.check`) on it.

    An error names the layer that introduced it: the first prefix of the layers that fails with
    the same message (``smoke.yaml: teacher.train.stepz: unknown key``), so an overlay's typo is
    never blamed on ``params.yaml``. Each layer's own keys and values are checked first
    (:func:`check_values`), so a bad value is refused even where a later layer replaces it.
    """
    def load(mapping: dict) -> Params:
        params = build(Params, mapping)
        if check is not None:
            check(params)
        return params

    for name, data in layers:  # a bad value is a fault even where a later layer replaces it
        try:
            check_values(Params, data)
        except ConfigError as err:
            raise ConfigError(f"{name}: {err}") from None
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
    the stage declares for it (``config_sections(args)`` of a stage module: ``{path: config class}``).

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

