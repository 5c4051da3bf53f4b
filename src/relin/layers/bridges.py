"""Vision-language bridges behind one interface, chosen by name: ``[B, N, d_in]`` patch features ->
``[B, N, d_out]`` LLM input embeddings (seed 000's comparison).

- ``lia_mtr``: :class:`~relin.layers.mtr_bridge.MTRBridge` (eqs. 1-5); ``lia_mtr_<variant>``: the same with the
  ``mtr`` options its row of :data:`~relin.config.lia_mtr.BRIDGES` changes (the head_matrix reading of the state;
  the ablations: no gate, one scale, log-half-life spacing, the normaliser);
- ``mlp2x_gelu``: LLaVA-1.5's projector, Linear -> GELU -> Linear (haotian-liu/LLaVA
  ``multimodal_projector/builder.py``), which mixes no tokens;
- ``mha``: softmax multi-head attention over the patches (SDPA, or the N x N matrix formed: the paper's
  quadratic baseline);
- ``linear_attn``: ungated, undecayed normalised linear attention with φ = ELU + 1 (Katharopoulos 2020),
  per-head K x V state, on :func:`relin.kernels.chunk_decayed_linear_attn`.

:class:`Bridge` reads the 2-D patch grid in a named scan order before the mixer and writes the output
back in the grid's raster order, so the LLM always sees patch i at position i.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

from ..config.lia_mtr import BRIDGES, BridgeConfig
from ..config.loader import as_dict, build
from ..errors import ConfigError
from .mtr_bridge import MTRBridge

SCAN_ORDERS = ("raster", "snake", "column")


class MLPBridge(nn.Module):
    """LLaVA's ``mlp2x_gelu``: ``Linear(d_in, d_out) -> GELU -> Linear(d_out, d_out)``, per patch."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d_in, d_out), nn.Linear(d_out, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class AttentionProjections(nn.Module):
    """The projections of the attention bridges, all without bias: ``q_proj``, ``k_proj``, ``v_proj``
    (``d_in -> d_in``, split into ``num_heads`` heads) and ``o_proj`` (``d_in -> d_out``)."""

    def __init__(self, d_in: int, d_out: int, num_heads: int):
        super().__init__()
        if d_in % num_heads:
            raise ValueError(f"d_in {d_in}: expected a multiple of num_heads ({num_heads})")
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_in, d_in, bias=False)
        self.k_proj = nn.Linear(d_in, d_in, bias=False)
        self.v_proj = nn.Linear(d_in, d_in, bias=False)
        self.o_proj = nn.Linear(d_in, d_out, bias=False)


class MHABridge(AttentionProjections):
    """Softmax multi-head attention over the patches, then ``o_proj`` to ``d_out``.

    ``impl="naive"`` forms the ``[B, H, N, N]`` score matrix (memory Θ(N²), the paper's MHA bridge);
    ``"sdpa"`` calls ``F.scaled_dot_product_attention`` (flash/memory-efficient kernels on the GPU).
    """

    def __init__(self, d_in: int, d_out: int, *, num_heads: int = 4, impl: str = "sdpa", causal: bool = True):
        super().__init__(d_in, d_out, num_heads)
        if impl not in ("sdpa", "naive"):
            raise ValueError(f"impl: expected 'sdpa' or 'naive', got {impl!r}")
        self.impl, self.causal = impl, causal

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, N, C = x.shape
        q, k, v = (p(x).view(B, N, self.num_heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        if self.impl == "sdpa":
            o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # [B, H, N, N]
            if self.causal:
                scores = scores.masked_fill(torch.ones(N, N, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            o = torch.softmax(scores, -1) @ v
        return self.o_proj(o.transpose(1, 2).reshape(B, N, C))


class LinearAttentionBridge(AttentionProjections):
    """Ungated linear attention: o_t = φ(q_t)ᵀ Σ_{j≤t} φ(k_j) v_jᵀ / φ(q_t)ᵀ Σ_{j≤t} φ(k_j), φ = ELU + 1."""

    def __init__(self, d_in: int, d_out: int, *, num_heads: int = 4, backend: str = "auto"):
        super().__init__(d_in, d_out, num_heads)
        self.backend = backend

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from relin.kernels.decayed_linear_attn import chunk_decayed_linear_attn

        B, N, C = x.shape
        heads = (B, N, self.num_heads, C // self.num_heads)
        q, k = (F.elu(p(x)) + 1 for p in (self.q_proj, self.k_proj))
        o, _ = chunk_decayed_linear_attn(q.view(heads), k.view(heads), self.v_proj(x).view(heads), normalize=True,
                                         backend=self.backend)
        return self.o_proj(o.reshape(B, N, C))


# The mixers by kind (relin.config.lia_mtr.BridgeRow.mixer): each builds from (d_in, d_out, the bridge config, the
# kernel backend).
MIXERS: dict[str, Callable[[int, int, BridgeConfig, str], nn.Module]] = {
    "mtr": lambda d_in, d_out, cfg, backend: MTRBridge(d_in, d_out, cfg.mtr, backend=backend),
    "mlp2x_gelu": lambda d_in, d_out, cfg, backend: MLPBridge(d_in, d_out),
    "mha": lambda d_in, d_out, cfg, backend: MHABridge(d_in, d_out, num_heads=cfg.attention_heads, impl=cfg.mha_impl,
                                                       causal=cfg.causal),
    "linear_attn": lambda d_in, d_out, cfg, backend: LinearAttentionBridge(d_in, d_out, num_heads=cfg.attention_heads,
                                                                           backend=backend),
}


def build_bridge_mixer(name: str, d_in: int, d_out: int, cfg: BridgeConfig, backend: str = "auto") -> nn.Module:
    """The mixer of bridge ``name`` (a row of :data:`~relin.config.lia_mtr.BRIDGES`: its mixer, with its variant's
    ``mtr`` options set); an unknown name is a :class:`ConfigError` listing the known ones."""
    if name not in BRIDGES:
        raise ConfigError(f"bridge: unknown {name!r} (expected one of: {', '.join(BRIDGES)})")
    row = BRIDGES[name]
    if row.variant:
        cfg = dataclasses.replace(cfg, mtr=dataclasses.replace(cfg.mtr, **row.variant))
    return MIXERS[row.mixer](d_in, d_out, cfg, backend)


def scan_permutation(num_patches: int, order: str) -> torch.Tensor:
    """Indices that read a square raster-ordered grid of ``num_patches`` in ``order`` ([N], long).

    ``raster``: row by row; ``snake``: row by row, every other row reversed (neighbours stay adjacent);
    ``column``: column by column.
    """
    side = math.isqrt(num_patches)
    grid = torch.arange(num_patches)
    if order == "raster" or side * side != num_patches:
        return grid
    grid = grid.view(side, side)
    if order == "snake":
        grid = torch.where((torch.arange(side) % 2 == 1)[:, None], grid.flip(1), grid)
        return grid.reshape(-1)
    if order == "column":
        return grid.t().reshape(-1)
    raise ConfigError(f"bridge.scan_order: unknown {order!r} (expected one of: {', '.join(SCAN_ORDERS)})")


class Bridge(nn.Module):
    """A named bridge with its scan order: ``forward(features [B, N, d_in]) -> [B, N, d_out]``.

    ``cfg`` is the ``lia_mtr.bridge`` section (:class:`~relin.config.lia_mtr.BridgeConfig`); :meth:`spec` holds
    its plain form, from which :meth:`from_spec` rebuilds a saved bridge, checking every key.
    """

    def __init__(self, name: str, d_in: int, d_out: int, cfg: BridgeConfig | None = None, backend: str = "auto"):
        super().__init__()
        self.name, self.d_in, self.d_out, self.cfg = name, d_in, d_out, cfg or BridgeConfig()
        self.scan_order, self.backend = self.cfg.scan_order, backend
        self.mixer = build_bridge_mixer(name, d_in, d_out, self.cfg, backend)

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "Bridge":
        """The bridge :meth:`spec` describes; an unknown or mistyped option is a :class:`ConfigError`."""
        return cls(spec["name"], spec["d_in"], spec["d_out"], build(BridgeConfig, spec.get("options"), "bridge"),
                   spec.get("kernel_backend", "auto"))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        if self.scan_order == "raster":
            return self.mixer(features)
        order = scan_permutation(features.shape[1], self.scan_order).to(features.device)
        out = torch.empty(*features.shape[:2], self.d_out, dtype=features.dtype, device=features.device)
        out[:, order] = self.mixer(features[:, order]).to(out.dtype)
        return out

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "d_in": self.d_in, "d_out": self.d_out, "options": as_dict(self.cfg),
                "kernel_backend": self.backend}
