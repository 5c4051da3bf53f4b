"""Decode attention over a static KV cache (one query per row): split-K "flash-decoding" and its fp32 reference."""
from .decode import decode_attention
from .ref import naive_decode_attention

__all__ = ["decode_attention", "naive_decode_attention"]
