"""Which parameters a stage trains, and how the optimizer treats some of them."""
from __future__ import annotations

from typing import Callable

import torch


def train_only(model: torch.nn.Module, keep: Callable[[str], bool]) -> None:
    """Gradients on the parameters whose names ``keep`` accepts, none on the others (the optimizer then holds
    only the former)."""
    for name, param in model.named_parameters():
        param.requires_grad_(keep(name))


def set_optimizer(param: torch.nn.Parameter, *, lr_scale: float = 1.0, eps: float = 1e-8,
                  weight_decay: float | None = None) -> None:
    """Give ``param`` its own AdamW settings: ``lr_scale`` times the schedule's lr, ``eps``, and (when given)
    ``weight_decay``; :func:`~relin.train.torch_backend.adamw` groups parameters by these settings."""
    settings = {"lr_scale": lr_scale, "eps": eps}
    if weight_decay is not None:
        settings["weight_decay"] = weight_decay
    param.optimizer_settings = settings
