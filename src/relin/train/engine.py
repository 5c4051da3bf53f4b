"""The model on its training device and the optimizer backend that updates it (torch or DeepSpeed ZeRO-2)."""
from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch

from ..config.train import TrainConfig
from .distributed import DistEnv, device_for, init_process_group
from .objectives import Objective
from .schedules import lr_multiplier


class Engine(Protocol):
    """An optimizer backend (:class:`~relin.train.torch_backend.TorchEngine`, DeepSpeed ZeRO-2): ``model`` runs the
    forward (wrapped for data parallelism), ``module`` is the bare model."""

    model: torch.nn.Module
    module: torch.nn.Module

    def micro_step(self, last: bool):
        """Context of one micro-batch's forward and backward."""

    def backward(self, loss: torch.Tensor, last: bool) -> None: ...

    def step(self) -> torch.Tensor | float:
        """Clip, update, advance the schedule; the pre-clip gradient norm (a device tensor the loop reads later, or
        a float). A non-finite one either drops the update and is returned (torch) or raises
        :class:`~relin.errors.TrainingDiverged` (DeepSpeed, whose update comes before its norm)."""

    def lr(self) -> float: ...

    def save(self, directory: Path) -> None: ...

    def load(self, directory: Path) -> None: ...


def use_bf16(precision: str, device: torch.device) -> bool:
    if precision == "bf16":
        return True
    return precision == "auto" and device.type == "cuda"


def prepare_model(model: torch.nn.Module, objective: Objective, cfg: TrainConfig, env: DistEnv) -> torch.device:
    """Put ``model`` in training mode on this rank's device (gradient checkpointing and ``torch.compile`` as
    ``cfg`` asks) and the objective's frozen modules there in eval mode; returns the device."""
    if cfg.backend == "torch":
        init_process_group(env)
    device = device_for(env)
    if cfg.gradient_checkpointing:
        from .trainable import enable_gradient_checkpointing

        enable_gradient_checkpointing(model)
    model.to(device).train()
    if cfg.compile and device.type == "cuda":
        # in place: parameter names, checkpoints and the caller's model kept
        model.compile(mode=None if cfg.compile_mode == "default" else cfg.compile_mode)
    for frozen in objective.frozen_modules():
        frozen.to(device).eval().requires_grad_(False)
    return device


def make_engine(model: torch.nn.Module, cfg: TrainConfig, env: DistEnv, device: torch.device) -> Engine:
    lr_fn = lr_multiplier(cfg.schedule, cfg.steps, cfg.warmup_steps, cfg.min_lr_ratio, cfg.decay_fraction)
    bf16 = use_bf16(cfg.precision, device)
    if cfg.backend == "deepspeed":
        from .deepspeed_backend import DeepSpeedEngine

        return DeepSpeedEngine(model, cfg, lr_fn, env, device, bf16)
    from .torch_backend import TorchEngine

    return TorchEngine(model, cfg, lr_fn, env, device, bf16)
