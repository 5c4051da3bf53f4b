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


def enable_gradient_checkpointing(model: torch.nn.Module) -> int:
    """Turn on gradient checkpointing in every outermost Hugging Face model inside ``model`` (the model itself, a
    VLM's LLM) that supports it, non-reentrant (frozen inputs and keyword arguments are fine); returns how many.

    Raises :class:`~relin.errors.ConfigError` when none does."""
    from transformers import PreTrainedModel

    from ..errors import ConfigError

    enabled, inside = 0, set()
    for name, module in model.named_modules():
        if any(name.startswith(prefix) for prefix in inside) or not isinstance(module, PreTrainedModel):
            continue
        inside.add(f"{name}." if name else "")
        if module.supports_gradient_checkpointing:
            kwargs = {"use_reentrant": False}
            if hasattr(module, "activation_checkpointing_enable"):  # transformers >= 5.2x's name
                module.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
            else:
                module.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
            enabled += 1
    if not enabled:
        raise ConfigError(f"train.gradient_checkpointing: {type(model).__name__} holds no model that supports it "
                          f"(expected a transformers model with checkpointable layers)")
    return enabled
