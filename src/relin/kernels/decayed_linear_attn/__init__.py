"""Decayed linear attention: S_t = exp(g_t) S_{t-1} + k_t v_tᵀ, o_t = scale · S_tᵀ q_t (optionally normalized).

Serves Hedgehog linear attention (g = None, normalize), Mamba-2/SSD (q = C, k = B, v = x·dt, g = dt·A,
scale = 1) and the HedgeMamba block.
"""
from .chunk import chunk_decayed_linear_attn
from .recurrent import fused_recurrent_decayed_linear_attn
from .ref import naive_recurrent_decayed_linear_attn

__all__ = ["chunk_decayed_linear_attn", "fused_recurrent_decayed_linear_attn", "naive_recurrent_decayed_linear_attn"]
