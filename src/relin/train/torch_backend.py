"""Plain PyTorch backend: AdamW + LambdaLR, DDP when launched with several processes, bf16 autocast on GPU."""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Callable

import torch

from .checkpoint import rng_state, set_rng_state
from .distributed import DistEnv

STATE_FILE = "state.pt"


def adamw(model: torch.nn.Module, cfg) -> torch.optim.AdamW:
    """AdamW over the trainable parameters; a parameter tagged by :func:`~relin.train.trainable.set_optimizer`
    joins a group with its own lr multiple, eps and weight decay (the schedule scales every group alike)."""
    groups: dict[tuple, list[torch.nn.Parameter]] = {}
    for p in model.parameters():
        if p.requires_grad:
            tag = getattr(p, "optimizer_settings", None) or {}
            groups.setdefault(tuple(sorted(tag.items())), []).append(p)
    param_groups = []
    for key, params in groups.items():
        tag = dict(key)
        scale = tag.get("lr_scale", 1.0)
        param_groups.append({"params": params, "lr": cfg.lr * scale, "lr_scale": scale, "eps": tag.get("eps", 1e-8),
                             "weight_decay": tag.get("weight_decay", cfg.weight_decay)})
    # The fused CUDA kernel: one launch per step instead of a few per parameter group and moment.
    fused = all(p.is_cuda for group in param_groups for p in group["params"]) or None
    return torch.optim.AdamW(param_groups, lr=cfg.lr, betas=tuple(cfg.betas), weight_decay=cfg.weight_decay,
                             fused=fused)


def schedule_lr(optimizer: torch.optim.Optimizer) -> float:
    """The schedule's current lr (what an untagged parameter gets)."""
    group = optimizer.param_groups[0]
    return group["lr"] / group.get("lr_scale", 1.0)


class TorchEngine:
    """One optimizer step = ``grad_accum`` backward calls, clipping, AdamW, scheduler."""

    def __init__(self, model: torch.nn.Module, cfg, lr_fn: Callable[[int], float], env: DistEnv,
                 device: torch.device, bf16: bool):
        self.module, self.env, self.device, self.bf16 = model, env, device, bf16
        self.clip = cfg.clip_grad_norm
        self.optimizer = adamw(model, cfg)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lr_fn)
        if env.distributed:
            from torch.nn.parallel import DistributedDataParallel

            ids = [device.index] if device.type == "cuda" else None
            self.model = DistributedDataParallel(model, device_ids=ids)
        else:
            self.model = model

    def micro_step(self, last: bool):
        """Context for one micro-batch's forward and backward: gradients sync only on the last."""
        sync = contextlib.nullcontext() if last or not self.env.distributed else self.model.no_sync()
        stack = contextlib.ExitStack()
        stack.enter_context(sync)
        if self.bf16:
            stack.enter_context(torch.autocast(self.device.type, dtype=torch.bfloat16))
        return stack

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        loss.backward()

    def step(self) -> torch.Tensor:
        """Clip, update, advance the schedule; returns the pre-clip gradient norm, still on the device. A non-finite
        norm drops the update (the schedule still advances) and is returned for the loop to count against
        ``train.skip_nonfinite_steps``."""
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        norm = torch.nn.utils.clip_grad_norm_(params, self.clip if self.clip > 0 else float("inf"))
        if self.optimizer.defaults.get("fused"):
            # The fused kernel reads ``found_inf`` (as under a GradScaler) and leaves parameters, moments and step
            # counts as they were: the drop needs no wait for the norm.
            self.optimizer.found_inf = (~torch.isfinite(norm)).float()
            self.optimizer.step()
        elif torch.isfinite(norm):
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return norm.detach()

    def lr(self) -> float:
        return schedule_lr(self.optimizer)

    def save(self, directory: Path) -> None:
        if self.env.is_main:
            torch.save({"model": self.module.state_dict(), "optimizer": self.optimizer.state_dict(),
                        "scheduler": self.scheduler.state_dict(), "rng": rng_state()}, directory / STATE_FILE)

    def load(self, directory: Path) -> None:
        state = torch.load(directory / STATE_FILE, map_location=self.device, weights_only=True)
        self.module.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
