"""The ``teacher`` section: which teachers the DAG trains, their model configs and their training."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from .loader import ConfigError, option
from .train import CurriculumStage, TrainConfig


@dataclass(kw_only=True)
class TeacherModelConfig:
    """A teacher transformer built from a transformers config, or loaded: by Hugging Face id or path
    (``pretrained``), or from a ``checkpoints`` row (``checkpoint``)."""

    family: Literal["qwen3", "gpt_neox", "llama"] = option(help="transformers architecture (llama: loaded only, "
                                                                "pretrained or checkpoint)")
    hidden_size: int = option(128, "model width", minimum=8)
    num_hidden_layers: int = option(2, "decoder layers", minimum=1)
    num_attention_heads: int = option(4, "query heads", minimum=1)
    num_key_value_heads: int | None = option(None, "key/value heads (Qwen3's GQA; unset: one per query head; "
                                                   "GPT-NeoX has no GQA)", minimum=1)
    head_dim: int | None = option(None, "per-head width (Qwen3; unset: hidden / heads; GPT-NeoX always uses "
                                        "hidden / heads)", minimum=4)
    intermediate_size: int = option(384, "MLP width", minimum=8)
    rotary_pct: float | None = option(None, "fraction of each head's dims RoPE rotates (GPT-NeoX; unset: Pythia's "
                                            "0.25; Qwen3 rotates them all)", minimum=0, maximum=1)
    rope_theta: float = option(10000.0, "RoPE base", exclusive_minimum=0)
    max_position_embeddings: int = option(1024, "longest position", minimum=8)
    initializer_range: float = option(0.02, "std of the normal initialisation of every weight matrix; without "
                                            "Qwen3's q/k norms, 0.02 leaves GPT-NeoX's attention logits near 0 "
                                            "and tiny models then never learn MQAR", exclusive_minimum=0)
    pretrained: str = option("", "Hugging Face id or local path to load instead of building "
                                 "(empty = build from this config and train)")
    checkpoint: str = option("", "a checkpoints row to load instead of building: the model relin "
                                 "pretrained-checkpoint materialised from its packages (empty = none)")
    curriculum: list[CurriculumStage] | None = option(None, "this teacher's length curriculum in place of "
                                                            "teacher.train.curriculum (unset: that one)")

    def validate(self, prefix: str) -> None:
        if self.pretrained and self.checkpoint:
            raise ConfigError(f"{prefix}: pretrained ({self.pretrained!r}) and checkpoint ({self.checkpoint!r}) both "
                              f"name the weights to load; expected one of them")
        if self.family == "llama" and not self.loaded:
            raise ConfigError(f"{prefix}.family: a llama teacher is loaded, never built from this config (relin "
                              f"builds qwen3 and gpt_neox teachers); expected pretrained or checkpoint set")
        ignored = {"qwen3": ("rotary_pct",), "gpt_neox": ("num_key_value_heads", "head_dim"),
                   "llama": ()}[self.family]
        for key in ignored:
            if getattr(self, key) is not None:
                raise ConfigError(f"{prefix}.{key}: a {self.family} teacher has no such option (it would be ignored); "
                                  f"expected it unset")
        if self.num_attention_heads % self.kv_heads:
            raise ConfigError(f"{prefix}.num_key_value_heads: expected a divisor of num_attention_heads "
                              f"({self.num_attention_heads}), got {self.num_key_value_heads}")
        if self.head_dim is None and self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"{prefix}.hidden_size: expected a multiple of num_attention_heads (the head width is "
                              f"hidden / heads)")

    @property
    def loaded(self) -> bool:
        """Loaded (``pretrained`` or ``checkpoint``), not built and trained in the DAG."""
        return bool(self.pretrained or self.checkpoint)

    @property
    def kv_heads(self) -> int:
        return self.num_key_value_heads or self.num_attention_heads

    @property
    def head_width(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def rotary_fraction(self) -> float:
        """RoPE's share of each head: Qwen3 all of it, GPT-NeoX ``rotary_pct`` (Pythia's 0.25 unset)."""
        return 1.0 if self.family == "qwen3" else (0.25 if self.rotary_pct is None else self.rotary_pct)


def teacher_train(train: TrainConfig, model: TeacherModelConfig) -> TrainConfig:
    """``teacher.train`` as one teacher trains: with its own ``curriculum`` where its model config sets one."""
    return train if model.curriculum is None else replace(train, curriculum=model.curriculum)


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
        for name, model in self.models.items():
            if model.curriculum is not None:
                teacher_train(self.train, model).validate(f"{prefix}.models.{name}")
