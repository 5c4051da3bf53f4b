"""Hedgehog linear attention (Zhang et al. 2024, arXiv 2402.04347), the layer that HedgeMamba's stage 1
trains (seeds/001 §3.1, eqs. 4-6), on :func:`relin.kernels.chunk_decayed_linear_attn` with no decay.

Per head, with the teacher's projections q = W_Q x + b_Q, k = W_K x + b_K, v = W_V x + b_V and a learnable
feature map φ (eq. 6) per head, separate for queries and keys (LoLCATs' ``tie_qk_kernels: false``):

    o_t = Σ_{s≤t} (φ(q_t)·φ(k_s)) v_s / Σ_{s≤t} φ(q_t)·φ(k_s)          (eqs. 4 and 9, normalised)

The softmax's 1/√D is not applied: any scale of q is absorbed by the learned map (LoLCATs does the
same). With partial rotary (GPT-NeoX rotates ``rotary_pct`` of each head), where φ sits is a named
option (methods.md §7A.6): ``pre_rope`` applies φ to the un-rotated q, k (no positions; the HedgeMamba
block, which has no RoPE, then reproduces the layer exactly) and ``post_rope`` to the rotated ones
(LoLCATs; the Mamba initialisation is then not exact). Padding positions write nothing (φ(k) zeroed).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..config.hedgemamba import HedgehogLayerConfig
from .rotary import apply_rotary

FEATURE_MAPS = ("exp", "softmax")
FEATURE_POSITIONS = ("pre_rope", "post_rope")


@dataclass
class LinearAttentionState:
    """A normalised linear-attention layer's decoding state: ``S [B, H, F, V]`` and ``z [B, H, F]`` (fp32)."""

    recurrent: torch.Tensor
    normalizer: torch.Tensor

    def nbytes(self) -> int:
        return self.recurrent.nbytes + self.normalizer.nbytes


class HedgehogFeatureMap(nn.Module):
    """φ_MLP of eq. 6, per head: ``y = W_h x + b_h`` then ``[exp(y), exp(−y)]`` (Hedgehog) or
    ``[softmax(y), softmax(−y)]`` over the head's features (LoLCATs' ``softmax_dim``).

    ``x [B, T, H, D]`` -> ``[B, T, H, 2D]``. Initialised to W = I, b = 0 (Hedgehog's listing).
    With ``shift`` (the query side), the exp map is ``[exp(y − m), exp(−y − m)]`` with ``m = max |y|`` per token
    and head: a per-query factor, which the normalised attention (eq. 9) divides out exactly, and which keeps
    every feature ≤ 1 (``exp`` overflows fp32 past 88; a trained map reaches that: NaN rows).
    """

    def __init__(self, num_heads: int, head_dim: int, kind: str = "exp", shift: bool = False):
        super().__init__()
        if kind not in FEATURE_MAPS:
            raise ValueError(f"feature map {kind!r}: expected one of {', '.join(FEATURE_MAPS)}")
        self.kind, self.shift = kind, shift
        self.weight = nn.Parameter(torch.empty(num_heads, head_dim, head_dim))
        self.bias = nn.Parameter(torch.empty(num_heads, head_dim))
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self) -> None:
        self.weight.copy_(torch.eye(self.weight.shape[-1]).expand_as(self.weight))
        self.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.einsum("bthd,hed->bthe", x, self.weight.to(x.dtype)) + self.bias.to(x.dtype)
        if self.kind == "softmax":
            return torch.cat([y.softmax(-1), (-y).softmax(-1)], dim=-1)
        # the factor's gradient cancels in the normalised output too, so it is taken as a constant
        m = y.detach().abs().amax(-1, keepdim=True) if self.shift else 0.0
        return torch.cat([(y - m).exp(), (-y - m).exp()], dim=-1)


class HedgehogAttention(nn.Module):
    """Hedgehog linear attention of one layer, with the teacher attention's projections.

    Args:
        width (int): model width C.
        num_heads (int): H (GPT-NeoX has as many key/value heads as query heads).
        head_dim (int): D; the feature dimension is 2D.
        cfg (HedgehogLayerConfig): the feature map (``exp`` | ``softmax``) and where it sits relative to RoPE
            (``pre_rope`` | ``post_rope``).
        bias (bool): biases on q/k/v and the output projection (GPT-NeoX's). Default: True.
        backend (str): kernel backend, ``auto`` | ``triton`` | ``torch``. Default: ``auto``.
    """

    def __init__(self, width: int, num_heads: int, head_dim: int, cfg: HedgehogLayerConfig | None = None, *,
                 bias: bool = True, backend: str = "auto"):
        super().__init__()
        cfg = cfg or HedgehogLayerConfig()
        feature_map, feature_position = cfg.feature_map, cfg.feature_position
        if feature_position not in FEATURE_POSITIONS:
            raise ValueError(f"feature position {feature_position!r}: expected one of {', '.join(FEATURE_POSITIONS)}")
        self.num_heads, self.head_dim = num_heads, head_dim
        self.feature_position, self.backend = feature_position, backend
        inner = num_heads * head_dim
        self.q_proj = nn.Linear(width, inner, bias=bias)
        self.k_proj = nn.Linear(width, inner, bias=bias)
        self.v_proj = nn.Linear(width, inner, bias=bias)
        self.o_proj = nn.Linear(inner, width, bias=bias)
        self.feature_map_q = HedgehogFeatureMap(num_heads, head_dim, feature_map, shift=True)
        self.feature_map_k = HedgehogFeatureMap(num_heads, head_dim, feature_map)

    def projections(self, hidden_states: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``q, k, v [B, T, H, D]`` before RoPE and the rotated ``q_rot, k_rot`` (what softmax attention scores)."""
        batch, steps, _ = hidden_states.shape
        heads = (batch, steps, self.num_heads, self.head_dim)
        q, k, v = (proj(hidden_states).view(heads) for proj in (self.q_proj, self.k_proj, self.v_proj))
        q_rot = apply_rotary(q.transpose(1, 2), *rope).transpose(1, 2)
        k_rot = apply_rotary(k.transpose(1, 2), *rope).transpose(1, 2)
        return q, k, v, q_rot, k_rot

    def features(self, q, k, q_rot, k_rot, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``φ(q), φ(k) [B, T, H, 2D]`` on the option's side of RoPE; φ(k) zero at padding (``real [B, T]``)."""
        if self.feature_position == "post_rope":
            q, k = q_rot, k_rot
        return self.feature_map_q(q), self.feature_map_k(k) * real[..., None, None]

    def forward(self, hidden_states: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor],
                padding: torch.Tensor | None = None, state: LinearAttentionState | None = None,
                use_cache: bool = False) -> tuple[torch.Tensor, LinearAttentionState | None]:
        """``hidden_states [B, T, C]``, ``rope`` (cos, sin ``[B, T, R]``), ``padding [B, T_past + T]`` (1 = real).
        Returns the output ``[B, T, C]`` and the state after the last token (when ``use_cache``)."""
        from relin.kernels.decayed_linear_attn import chunk_decayed_linear_attn

        batch, steps, _ = hidden_states.shape
        real = (torch.ones(batch, steps, device=hidden_states.device) if padding is None
                else padding[:, -steps:].to(hidden_states.dtype))
        q, k, v, q_rot, k_rot = self.projections(hidden_states, rope)
        fq, fk = self.features(q, k, q_rot, k_rot, real)
        initial = None if state is None else (state.recurrent, state.normalizer)
        o, final = chunk_decayed_linear_attn(fq, fk, v, normalize=True, initial_state=initial,
                                             output_final_state=use_cache, backend=self.backend)
        new_state = LinearAttentionState(*final) if use_cache else None
        return self.o_proj(o.reshape(batch, steps, -1)), new_state
