"""The MLPs of the teachers' blocks: Qwen3's gated ``down(SiLU(gate(x)) · up(x))`` and GPT-NeoX's
``dense_4h_to_h(act(dense_h_to_4h(x)))`` with biases (names kept, so a teacher's weights copy in). At inference
over frozen weights the gated MLP's gate and up projections run as one GEMM (:mod:`.stacked_linear`)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .stacked_linear import stacked_projection


class GatedMLP(nn.Module):
    def __init__(self, width: int, inner: int):
        super().__init__()
        self.gate_proj = nn.Linear(width, inner, bias=False)
        self.up_proj = nn.Linear(width, inner, bias=False)
        self.down_proj = nn.Linear(inner, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.is_grad_enabled() or self.gate_proj.weight.requires_grad or self.up_proj.weight.requires_grad:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        gate, up = stacked_projection(self, ("gate_proj", "up_proj"), x).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DenseMLP(nn.Module):
    """GPT-NeoX's MLP; ``activation`` is a transformers ``ACT2FN`` name (Pythia: ``gelu``, the exact erf form)."""

    def __init__(self, width: int, inner: int, activation: str = "gelu"):
        super().__init__()
        from transformers.activations import ACT2FN

        self.dense_h_to_4h = nn.Linear(width, inner)
        self.dense_4h_to_h = nn.Linear(inner, width)
        self.act = ACT2FN[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense_4h_to_h(self.act(self.dense_h_to_4h(x)))
