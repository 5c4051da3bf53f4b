"""Chunked PyTorch form of decayed linear attention: the CPU path, differentiable by autograd.

Per chunk of C positions with b the in-chunk cumulative log decay (notes/chunked-algorithms.md §1):
    O = scale · (diag(e^b) Q S_0 + tril(e^{b_i - b_j} ⊙ Q Kᵀ) V)
    S_C = e^{b_C} S_0 + (diag(e^{b_C - b}) K)ᵀ V
Intra-chunk terms are batched over all chunks; only the state pass loops over chunks.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.chunk_tables import CHUNK_SIZE


def chunk_decayed_linear_attn_torch(q, k, v, g, scale, initial_state, chunk_size=CHUNK_SIZE):
    """q, k: [B, T, H, K]; v: [B, T, H, V]; g: [B, T, H] or None; initial_state: [B, H, K, V] or None.

    Returns o [B, T, H, V] in fp32 and the final state [B, H, K, V] in fp32.
    """
    B, T, H, K = q.shape
    V = v.shape[-1]
    C = chunk_size
    pad = (-T) % C
    n_chunks = (T + pad) // C
    q, k, v = (F.pad(x.float(), (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
    # padded tokens carry k = v = 0 and decay 1, so they leave the state untouched
    g = q.new_zeros(B, T + pad, H) if g is None else F.pad(g.float(), (0, 0, 0, pad))

    def chunked(x):  # [B, T, H, D] -> [B, H, n_chunks, C, D]
        return x.reshape(B, n_chunks, C, H, x.shape[-1]).permute(0, 3, 1, 2, 4)

    q, k, v = chunked(q), chunked(k), chunked(v)
    b = chunked(g[..., None]).squeeze(-1).cumsum(-1)  # [B, H, n_chunks, C]
    causal = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    # mask the exponent, not the product: e^{b_i - b_j} overflows above the diagonal
    decay = torch.exp((b[..., :, None] - b[..., None, :]).masked_fill(~causal, float("-inf")))
    intra = ((q @ k.transpose(-1, -2)) * decay) @ v
    q_decayed = q * b.exp()[..., None]
    k_to_end = k * (b[..., -1:] - b).exp()[..., None]
    chunk_decay = b[..., -1].exp()  # [B, H, n_chunks]

    S = q.new_zeros(B, H, K, V) if initial_state is None else initial_state.float()
    outputs = []
    for c in range(n_chunks):
        outputs.append(intra[:, :, c] + q_decayed[:, :, c] @ S)
        S = chunk_decay[:, :, c, None, None] * S + k_to_end[:, :, c].transpose(-1, -2) @ v[:, :, c]
    o = (torch.stack(outputs, dim=2) if outputs else intra) * scale  # [B, H, n_chunks, C, V]
    o = o.permute(0, 2, 3, 1, 4).reshape(B, T + pad, H, V)[:, :T]
    return o, S
