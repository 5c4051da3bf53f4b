"""``layer_align``: per-layer output alignment of a student to a frozen teacher at named modules.

For each pair ``(student module, teacher module)`` the outputs on the same micro-batch are compared
at every real (non-padding) position, captured with forward hooks (the models are not edited):

- ``mse``: mean over features of (s − t)² per position (MOHAWK stage 2, OPAL stage 1);
- ``cosine``: 1 − cos(s, t) per position (HedgeMamba's reading of stage 1).

With ``inputs="teacher"`` (default) each student module receives the hidden states its teacher
module received, so every layer is aligned on the same input, independently of the layers below it
(RADLADS' stage 1); with ``inputs="own"`` the student runs on its own hidden states. Targets are
positions × aligned layers.
"""
from __future__ import annotations

import contextlib
from typing import Literal

import torch
import torch.nn.functional as F

from ...errors import ConfigError
from ..teacher import FrozenTeacher, capturing, named_module
from .base import Objective, ObjectiveOutput, register


@contextlib.contextmanager
def substituted_inputs(model: torch.nn.Module, replacements: dict[str, torch.Tensor]):
    """Forward pre-hooks that call each named module on the given hidden states instead of its own."""
    def hook(name):
        def swap(module, args, kwargs):
            if "hidden_states" in kwargs:
                return args, {**kwargs, "hidden_states": replacements[name]}
            return (replacements[name], *args[1:]), kwargs
        return swap

    handles = [named_module(model, name).register_forward_pre_hook(hook(name), with_kwargs=True)
               for name in replacements]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@register
class LayerAlignment(Objective):
    """Alignment of named student modules' outputs to the teacher's.

    Args:
        teacher (FrozenTeacher): the frozen teacher.
        layers (dict[str, str] | list[str]): student module name -> teacher module name (a list
            when the names match, e.g. ``model.layers.0.self_attn``).
        loss (str): ``mse`` or ``cosine``. Default: ``mse``.
        inputs (str): ``teacher`` (each module on the teacher's input) or ``own``. Default: ``teacher``.
    """

    name = "layer_align"

    def __init__(self, teacher: FrozenTeacher, layers: dict[str, str] | list[str],
                 loss: Literal["mse", "cosine"] = "mse", inputs: Literal["teacher", "own"] = "teacher"):
        self.pairs = dict(layers) if isinstance(layers, dict) else {name: name for name in layers}
        if not self.pairs:
            raise ConfigError("layer_align.layers: expected at least one module name")
        if loss not in ("mse", "cosine") or inputs not in ("teacher", "own"):
            raise ConfigError(f"layer_align: expected loss mse|cosine and inputs teacher|own, got {loss!r}, {inputs!r}")
        self.teacher, self.loss, self.inputs = teacher, loss, inputs
        teacher.capture(self.pairs.values())

    def frozen_modules(self):
        return [self.teacher.module]

    def count_targets(self, batch):
        return int(batch["attention_mask"].sum()) * len(self.pairs)

    def __call__(self, model, batch):
        reference = self.teacher(batch)
        outputs: dict[str, torch.Tensor] = {}
        swaps = ({s: reference.inputs[t] for s, t in self.pairs.items()} if self.inputs == "teacher" else {})
        with capturing(model, self.pairs, {}, outputs), substituted_inputs(model, swaps):
            model.base_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        mask = batch["attention_mask"].bool()
        loss = torch.zeros((), device=mask.device)
        for student_name, teacher_name in self.pairs.items():
            s, t = outputs[student_name][mask].float(), reference.outputs[teacher_name][mask].float()
            per_position = ((s - t) ** 2).mean(-1) if self.loss == "mse" else 1 - F.cosine_similarity(s, t, dim=-1)
            loss = loss + per_position.sum()
        return ObjectiveOutput(loss, {"align_loss": loss.detach()})
