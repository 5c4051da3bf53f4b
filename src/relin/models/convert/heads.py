"""Grouped key/value heads repeated to every query head, on the weights (what ``repeat_kv`` does to the outputs)."""
from __future__ import annotations

import torch


def expand_heads(weight: torch.Tensor, kv_heads: int, heads: int) -> torch.Tensor:
    """``[kv_heads·D, C]`` -> ``[heads·D, C]``, each kv head's block of D rows repeated heads/kv_heads times."""
    head_dim = weight.shape[0] // kv_heads
    return weight.view(kv_heads, head_dim, -1).repeat_interleave(heads // kv_heads, 0).reshape(heads * head_dim, -1)
