"""Which parameters a stage trains."""
from __future__ import annotations

from typing import Callable

import torch


def train_only(model: torch.nn.Module, keep: Callable[[str], bool]) -> None:
    """Gradients on the parameters whose names ``keep`` accepts, none on the others (the optimizer then holds
    only the former)."""
    for name, param in model.named_parameters():
        param.requires_grad_(keep(name))
