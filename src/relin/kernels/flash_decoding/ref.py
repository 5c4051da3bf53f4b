"""fp32 reference of decode attention over a static cache, and the argument contract every path checks.

Row b's query head h reads key/value head ``h // G`` (``G = H / H_kv``, grouped-query attention) at the filled
slots ``start[b] ≤ j < length``:

    o[b, h] = Σ_j softmax_j(scale · q[b, h] · k[b, h // G, j]) · v[b, h // G, j].
"""
from __future__ import annotations

import torch

# Widest head dim the Triton kernel serves: a [BT, D] key tile and a [G, D] accumulator per program stay on chip.
MAX_HEAD_DIM = 256


def check_inputs(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, length: torch.Tensor,
                 start: torch.Tensor | None) -> None:
    """Validate a decode-attention call: one ValueError line naming the argument."""
    if q.dim() != 3:
        raise ValueError(f"q must be [B, H, D]; got {tuple(q.shape)}")
    B, H, D = q.shape
    if k_cache.dim() != 4 or k_cache.shape[0] != B or k_cache.shape[3] != D:
        raise ValueError(f"k_cache must be [B, H_kv, T_max, D] = [{B}, H_kv, T_max, {D}]; got {tuple(k_cache.shape)}")
    if v_cache.shape != k_cache.shape:
        raise ValueError(f"v_cache must match k_cache {tuple(k_cache.shape)}; got {tuple(v_cache.shape)}")
    if H % k_cache.shape[1]:
        raise ValueError(f"H = {H} query heads: expected a multiple of H_kv = {k_cache.shape[1]}")
    if length.dim() != 0 or length.dtype != torch.long:
        raise ValueError(f"length must be a 0-d int64 tensor; got shape {tuple(length.shape)}, {length.dtype}")
    if start is not None and (start.shape != (B,) or start.dtype != torch.long):
        raise ValueError(f"start must be [B] = [{B}] int64; got shape {tuple(start.shape)}, {start.dtype}")


def naive_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, length: torch.Tensor,
                           start: torch.Tensor | None = None, scale: float | None = None) -> torch.Tensor:
    """``q [B, H, D]``, ``k_cache, v_cache [B, H_kv, T_max, D]``, ``length`` (0-d int64: slots filled, the query's own
    key included), ``start [B]`` (int64: each row's first real slot; 0 without). Returns ``o [B, H, D]`` in q's
    dtype, computed in fp32. A row with no filled slot returns zeros."""
    check_inputs(q, k_cache, v_cache, length, start)
    B, H, D = q.shape
    groups = H // k_cache.shape[1]
    scale = D ** -0.5 if scale is None else scale
    filled = int(length)
    keys = k_cache[:, :, :filled].float().repeat_interleave(groups, 1)          # [B, H, T, D]
    values = v_cache[:, :, :filled].float().repeat_interleave(groups, 1)
    scores = torch.einsum("bhd,bhtd->bht", q.float() * scale, keys)
    first = torch.zeros(B, dtype=torch.long, device=q.device) if start is None else start
    real = torch.arange(filled, device=q.device)[None, :] >= first[:, None]     # [B, T]
    scores = scores.masked_fill(~real[:, None, :], float("-inf"))
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)                     # rows with no real slot: zeros
    return torch.einsum("bht,bhtd->bhd", weights, values).to(q.dtype)
