"""Softmax attention as in Qwen3 (q/k RMSNorm per head, RoPE, grouped-query heads), full or over a
sliding window with sink tokens (the SWA(window, sinks) baseline of OPAL, after StreamingLLM).

Projections keep Qwen3's names (``q_proj``, ``k_proj``, ``v_proj``, ``o_proj``, ``q_norm``,
``k_norm``), so a teacher's attention copies in with ``load_state_dict``. The cache of a layer is an
:class:`AttentionState` holding every past key and value; a sliding window masks them rather than
dropping them, because the sink tokens stay visible for ever.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .norms import RMSNorm
from .rotary import apply_rotary
from .stacked_linear import frozen, stacked_projection


@dataclass
class AttentionState:
    """Past keys and values of one layer, ``[B, H_kv, T_past, D]`` each."""

    keys: torch.Tensor
    values: torch.Tensor

    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, AttentionState]:
        """Append ``keys, values [B, H_kv, T, D]``; returns all keys and values ``[B, H_kv, T_past + T, D]``
        and the grown state (a new object: the dynamic cache grows by concatenation)."""
        keys, values = torch.cat([self.keys, keys], dim=2), torch.cat([self.values, values], dim=2)
        return keys, values, AttentionState(keys, values)


@dataclass
class StaticAttentionState(AttentionState):
    """Preallocated keys and values ``[B, H_kv, T_max, D]`` of one layer, written in place at
    ``length`` (a 0-d int64 device tensor shared by every layer of a static cache, advanced by the
    cache after each forward), so that a decode step has fixed shapes and no host sync (CUDA-graph
    safe). Slots at and beyond ``length + T`` hold stale or zero values; :func:`static_attention_mask`
    hides them, and the one-token decode step (:func:`relin.kernels.flash_decoding`) never reads them.
    ``start [B]`` (shared likewise) is each row's first real slot."""

    length: torch.Tensor | None = None
    start: torch.Tensor | None = None

    def update(self, keys: torch.Tensor, values: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, StaticAttentionState]:
        """Write ``keys, values [B, H_kv, T, D]`` at slots ``length … length + T - 1``; returns the whole
        buffers ``[B, H_kv, T_max, D]`` and this state."""
        slots = self.length + torch.arange(keys.shape[2], device=keys.device)
        self.keys.index_copy_(2, slots, keys.to(self.keys.dtype))
        self.values.index_copy_(2, slots, values.to(self.values.dtype))
        return self.keys, self.values, self


def static_attention_mask(length: torch.Tensor, num_queries: int, max_length: int, window: int | None = None,
                          sinks: int = 0, start: torch.Tensor | None = None) -> torch.Tensor:
    """``[B, 1, T_q, T_max]`` bool mask over a static cache's slots for queries at slots
    ``length … length + T_q - 1`` (``length`` a 0-d device tensor), ``B = 1`` without ``start``.
    ``start [B]`` is each row's first real slot (its left padding): key j is seen when
    ``start ≤ j ≤`` the query's slot and, with a ``window``, within ``window`` of it or among the row's
    first ``sinks`` real tokens. The same rule as :func:`attention_mask`; a padding query sees itself."""
    q_slot = (length + torch.arange(num_queries, device=length.device))[:, None]    # [T_q, 1]
    k_slot = torch.arange(max_length, device=length.device)[None, :]                # [1, T_max]
    start = torch.zeros(1, dtype=torch.long, device=length.device) if start is None else start
    real = k_slot[None] >= start[:, None, None]                                     # [B, 1, T_max]
    allowed = (k_slot <= q_slot)[None] & real                                       # [B, T_q, T_max]
    if window is not None:
        allowed &= (q_slot - k_slot < window)[None] | (k_slot[None] - start[:, None, None] < sinks)
    empty = ~allowed.any(-1, keepdim=True)
    allowed |= empty & (k_slot == q_slot)[None]
    return allowed[:, None]


def attention_mask(key_padding: torch.Tensor, num_queries: int, window: int | None = None,
                   sinks: int = 0) -> torch.Tensor:
    """``[B, 1, T_q, T_k]`` bool mask: query i (the last ``num_queries`` of the keys) sees key j when
    j ≤ i, key j is not padding, and, with a ``window``, its position is within ``window`` of the
    query's or among the first ``sinks``. Positions count real tokens (left padding shifts them).

    A query that sees nothing (a padding query) is let see itself, so softmax stays finite.
    """
    batch, num_keys = key_padding.shape
    real = key_padding.bool()
    positions = real.long().cumsum(-1) - 1                                  # [B, T_k]
    q_index = torch.arange(num_keys - num_queries, num_keys, device=real.device)
    k_index = torch.arange(num_keys, device=real.device)
    allowed = (k_index[None, :] <= q_index[:, None])[None] & real[:, None, :]    # [B, T_q, T_k]
    if window is not None:
        q_pos = positions[:, -num_queries:, None]
        k_pos = positions[:, None, :]
        allowed &= (q_pos - k_pos < window) | (k_pos < sinks)
    empty = ~allowed.any(-1, keepdim=True)
    allowed |= empty & (k_index[None, None, :] == q_index[None, :, None])
    return allowed[:, None]


class Attention(nn.Module):
    """Grouped-query softmax attention of one layer.

    Args:
        width (int): model width C.
        num_heads, num_kv_heads (int): query heads H and key/value heads (H is a multiple).
        head_dim (int): D.
        qk_norm (bool): RMSNorm over D on q and k before RoPE (Qwen3). Default: True.
        bias (bool): biases on q/k/v projections. Default: False.
        out_bias (bool): a bias on the output projection (GPT-NeoX's ``dense``). Default: False.
        window (int, Optional): sliding window in tokens (None = full attention).
        sinks (int): with a window, the first tokens every query also sees. Default: 0.
        backend (str): kernel backend of the static-cache decode step, ``auto`` | ``triton`` | ``torch``.

    A one-token step through a :class:`StaticAttentionState` without a window runs
    :func:`relin.kernels.flash_decoding`: grouped heads read in place, only the filled slots. Every other call
    runs SDPA under the mask, the key/value heads repeated to the query heads.
    """

    def __init__(self, width: int, num_heads: int, num_kv_heads: int, head_dim: int, *, qk_norm: bool = True,
                 bias: bool = False, out_bias: bool = False, eps: float = 1e-6, window: int | None = None,
                 sinks: int = 0, backend: str = "auto"):
        super().__init__()
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.window, self.sinks, self.backend = window, sinks, backend
        self.q_proj = nn.Linear(width, num_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(width, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(width, num_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * head_dim, width, bias=out_bias)
        self.q_norm = RMSNorm(head_dim, eps) if qk_norm else nn.Identity()
        self.k_norm = RMSNorm(head_dim, eps) if qk_norm else nn.Identity()

    def project(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q, k, v ``[B, T, H·D]``, ``[B, T, H_kv·D]`` twice; one GEMM at inference over frozen, bias-free weights
        (:mod:`.stacked_linear`)."""
        names = ("q_proj", "k_proj", "v_proj")
        if torch.is_grad_enabled() or self.q_proj.bias is not None or not frozen([getattr(self, n) for n in names]):
            return self.q_proj(x), self.k_proj(x), self.v_proj(x)
        kv = self.num_kv_heads * self.head_dim
        return stacked_projection(self, names, x).split([self.num_heads * self.head_dim, kv, kv], dim=-1)

    def decodes_without_mask(self, steps: int) -> bool:
        """Whether a step of ``steps`` tokens through a static cache reads it with the decode kernel (no mask)."""
        return steps == 1 and self.window is None

    def forward(self, hidden_states: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor,
                state: AttentionState | None = None, use_cache: bool = False
                ) -> tuple[torch.Tensor, AttentionState | None]:
        """``hidden_states [B, T, C]``, ``rope`` (cos, sin ``[B, T, R]``), ``mask [B, 1, T, T_past + T]``
        from :func:`attention_mask` (``[1, 1, T, T_max]`` from :func:`static_attention_mask` with a
        :class:`StaticAttentionState`). Returns the output ``[B, T, C]`` and the grown state (a static
        state is written in place and returned as is)."""
        batch, steps, _ = hidden_states.shape
        q, k, v = self.project(hidden_states)
        q = self.q_norm(q.view(batch, steps, self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(k.view(batch, steps, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v = v.reshape(batch, steps, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        if state is not None:
            k, v, new_state = state.update(k, v)
        else:
            new_state = AttentionState(k, v)
        new_state = new_state if use_cache else None
        if self.decodes_without_mask(steps) and isinstance(state, StaticAttentionState):
            from relin.kernels.flash_decoding import decode_attention

            out = decode_attention(q[:, :, 0], k, v, state.length + 1, state.start, self.head_dim ** -0.5,
                                   backend=self.backend)
            return self.o_proj(out.reshape(batch, 1, -1)), new_state
        groups = self.num_heads // self.num_kv_heads
        out = F.scaled_dot_product_attention(q, k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1),
                                             attn_mask=mask, scale=self.head_dim ** -0.5)
        return self.o_proj(out.transpose(1, 2).reshape(batch, steps, -1)), new_state
