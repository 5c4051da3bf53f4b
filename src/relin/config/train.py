"""The training loop's config (``teacher.train`` and every training stage's ``train``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .loader import ConfigError, option


@dataclass(kw_only=True)
class CurriculumStage:
    """One stage of a length/difficulty curriculum: until ``until_step``, train on examples up to ``max_len``."""

    until_step: int = option(help="last optimizer step of this stage", minimum=1)
    max_len: int = option(help="longest training example (tokens) in this stage", minimum=4)
    batch_size: int = option(0, "rows per micro-batch in this stage (0 = the training config's batch_size); "
                                "short stages can afford more rows, which makes the MQAR key match form for "
                                "more seeds (docs/measurements/teacher-niah-cpu.md)", minimum=0)


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
    skip_nonfinite_steps: int = option(0, "optimizer steps whose gradient norm is not finite that are skipped "
                                          "(update dropped, counted in the history's skipped_steps, across "
                                          "resumes) before the run stops as diverged; 0 = stop at the first "
                                          "(torch backend only)", minimum=0)
    checkpoint_every: int = option(200, "steps between resumable checkpoints", minimum=1)
    log_every: int = option(10, "steps between logged metrics", minimum=1)
    backend: Literal["torch", "deepspeed"] = option("torch", "plain PyTorch or DeepSpeed ZeRO-2")
    gradient_checkpointing: bool = option(False, "recompute each decoder layer's activations in the backward pass "
                                                 "(memory for long rows; about a third more compute)")
    precision: Literal["auto", "fp32", "bf16"] = option("auto", "auto = bf16 on GPU, fp32 on CPU")
    compile: bool = option(False, "torch.compile the model on a GPU (fuses its elementwise work; the first steps "
                                  "pay the compilation; ignored on a CPU)")
    compile_mode: Literal["default", "max-autotune-no-cudagraphs"] = option(
        "default", "torch.compile's mode with compile: max-autotune-no-cudagraphs times candidate matmul and "
                   "fused kernels for each shape (minutes of compilation, for long runs of fixed shapes)")
    seed: int = option(0, "training seed (init, batch order)")
    curriculum: list[CurriculumStage] = option([], "length curriculum (empty = full length throughout)")
    task_weights: dict[str, float] = option({}, "mixture weight per data task: its share of drawn rows, "
                                                "whatever its row count (unlisted weigh 1; 0 leaves it out; "
                                                "empty = rows drawn uniformly)")
    bucket_by_length: bool = option(True, "draw each step's rows from one length bucket (next power of two) "
                                          "so short rows are not padded to the longest")

    def validate(self, prefix: str) -> None:
        if self.skip_nonfinite_steps and self.backend == "deepspeed":
            raise ConfigError(f"{prefix}.skip_nonfinite_steps: DeepSpeed applies the update before the gradient "
                              f"norm is known, so a step cannot be skipped; expected 0 with backend deepspeed")
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
