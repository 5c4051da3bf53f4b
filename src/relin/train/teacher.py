"""A frozen network that several objectives query on the same micro-batch.

The teacher runs once per micro-batch whatever number of objectives read it (distillation reads its
last hidden state, alignment the inputs and outputs of named layers): the first query computes
everything any of them registered, later queries of the same batch get the cached result. It never
trains: parameters do not require gradients, it stays in eval mode, and the loop never hands it to
the optimizer (:meth:`relin.train.objectives.base.Objective.frozen_modules`).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ..errors import ConfigError


def first_tensor(value):
    """The tensor of a module's output or input (HF modules often return tuples)."""
    return value[0] if isinstance(value, (tuple, list)) else value


def hidden_states_input(args: tuple, kwargs: dict) -> torch.Tensor:
    """The ``hidden_states`` a layer was called with, positional or keyword."""
    return kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]


@dataclass
class TeacherPass:
    """What one teacher forward produced: ``hidden [B, T, H]`` (the last hidden state) and, per
    captured module name, the hidden states it received and its output (``[B, T, H]`` each)."""

    hidden: torch.Tensor
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    outputs: dict[str, torch.Tensor] = field(default_factory=dict)


def named_module(model: torch.nn.Module, name: str) -> torch.nn.Module:
    try:
        return model.get_submodule(name)
    except AttributeError:
        raise ConfigError(f"layer {name!r}: no such module in {type(model).__name__} (e.g. "
                          f"{', '.join(n for n, _ in list(model.named_modules())[1:4])})") from None


@contextlib.contextmanager
def capturing(model: torch.nn.Module, names, inputs: dict, outputs: dict):
    """Forward hooks that record the input hidden states and the output of each named module."""
    def hook(name):
        def record(module, args, kwargs, output):
            inputs[name] = hidden_states_input(args, kwargs)
            outputs[name] = first_tensor(output)
        return record

    handles = [named_module(model, name).register_forward_hook(hook(name), with_kwargs=True) for name in names]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


class FrozenTeacher:
    """Wraps a causal LM; ``teacher(batch)`` gives its :class:`TeacherPass` on that batch."""

    def __init__(self, model: torch.nn.Module):
        self.module = model.eval().requires_grad_(False)
        self._captured: list[str] = []
        self._last: tuple[dict, TeacherPass] | None = None

    def capture(self, names) -> None:
        """Also record these modules' inputs and outputs on every pass (alignment targets)."""
        for name in names:
            named_module(self.module, name)
            if name not in self._captured:
                self._captured.append(name)

    @property
    def head(self) -> torch.nn.Module:
        return self.module.get_output_embeddings()

    @torch.no_grad()
    def __call__(self, batch: dict[str, torch.Tensor]) -> TeacherPass:
        if self._last is not None and self._last[0] is batch:
            return self._last[1]
        result = TeacherPass(hidden=torch.empty(0))
        with capturing(self.module, self._captured, result.inputs, result.outputs):
            result.hidden = self.module.base_model(input_ids=batch["input_ids"],
                                                   attention_mask=batch["attention_mask"]).last_hidden_state
        self._last = (batch, result)  # holds the batch, so identity cannot be reused by another one
        return result
