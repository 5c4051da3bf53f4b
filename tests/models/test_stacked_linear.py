"""Stacked projections at inference: one GEMM over frozen weights, its stack retaken when a weight changes in
place or is replaced; trainable weights never stacked (a captured graph must read the live parameters)."""
import torch
from torch import nn

from relin.layers.mlp import GatedMLP
from relin.layers.stacked_linear import stacked_projection


def _owner():
    torch.manual_seed(0)
    owner = nn.Module()
    owner.a, owner.b = nn.Linear(8, 3, bias=False), nn.Linear(8, 5, bias=False)
    return owner


def _separate(owner, x):
    return torch.cat([owner.a(x), owner.b(x)], dim=-1)


@torch.no_grad()
def test_frozen_weights_are_stacked_once_and_retaken_after_a_change():
    owner, x = _owner().requires_grad_(False), torch.randn(4, 8)
    assert torch.allclose(stacked_projection(owner, ("a", "b"), x), _separate(owner, x), atol=1e-6)
    stack = owner.__dict__["_stacked_a_b"][1]
    stacked_projection(owner, ("a", "b"), x)
    assert owner.__dict__["_stacked_a_b"][1] is stack, "unchanged weights reuse the stack"
    owner.b.weight.mul_(2.0)                                         # an in-place update (an optimizer step)
    assert torch.allclose(stacked_projection(owner, ("a", "b"), x), _separate(owner, x), atol=1e-6)
    owner.a.weight = nn.Parameter(torch.randn(3, 8), requires_grad=False)   # a replaced weight
    assert torch.allclose(stacked_projection(owner, ("a", "b"), x), _separate(owner, x), atol=1e-6)


@torch.no_grad()
def test_trainable_weights_are_never_stacked():
    owner, x = _owner(), torch.randn(4, 8)
    assert torch.allclose(stacked_projection(owner, ("a", "b"), x), _separate(owner, x), atol=1e-6)
    assert "_stacked_a_b" not in owner.__dict__
    mlp = GatedMLP(8, 16)
    mlp(x)
    assert not any(key.startswith("_stacked") for key in mlp.__dict__)
    mlp.requires_grad_(False)
    mlp(x)
    assert "_stacked_gate_proj_up_proj" in mlp.__dict__
