"""Chunk tables of the chunked kernels: every call is treated as variable-length.

A fixed-length batch [B, T] is the packed sequence [1, B·T] with cu_seqlens = (0, T, 2T, ...), so one set of
kernels serves both layouts. ``chunk_indices`` [NT, 2] int32 holds (sequence, chunk within it) for every chunk in
packing order; ``chunk_offsets`` [N+1] int64 the index of each sequence's first chunk.
"""
from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl


@functools.lru_cache(maxsize=64)
def equal_length_chunks(batch: int, seq_len: int, chunk: int, device: torch.device):
    """(cu_seqlens, chunk_indices, chunk_offsets) for ``batch`` sequences of ``seq_len`` tokens.

    Built on ``device`` by arange (a host-to-device copy from pageable memory would wait for the stream to
    drain) and cached: a training step calls the op with the same shape in every layer, and each table costs
    a handful of launches. Callers must not write to them.
    """
    count = -(-seq_len // chunk)
    # Normal tensors even when first built under inference_mode: the ops save them for backward.
    with torch.inference_mode(False), torch.no_grad():
        sequences = torch.arange(batch + 1, dtype=torch.int64, device=device)
        chunk_indices = torch.stack((
            sequences[:-1].to(torch.int32).repeat_interleave(count),
            torch.arange(count, dtype=torch.int32, device=device).repeat(batch)), 1)
        return sequences * seq_len, chunk_indices, sequences * count


def varlen_chunks(cu_seqlens: torch.Tensor, chunk: int, device: torch.device):
    """(chunk_indices, chunk_offsets) on ``device`` for packed sequences; pass ``cu_seqlens`` on the CPU."""
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    counts = [-(-n // chunk) for n in lengths]
    indices = [(n, c) for n, count in enumerate(counts) for c in range(count)]
    offsets = [0]
    for count in counts:
        offsets.append(offsets[-1] + count)
    chunk_indices = torch.tensor(indices, dtype=torch.int32).reshape(-1, 2).to(device)
    return chunk_indices, torch.tensor(offsets, dtype=torch.int64).to(device)


@triton.jit
def locate_chunk(chunk_indices, cu_seqlens, i_tg):
    """Device side: (chunk index within its sequence, sequence start, sequence end) of global chunk ``i_tg``,
    all int64."""
    i_n = tl.load(chunk_indices + i_tg * 2).to(tl.int64)
    i_c = tl.load(chunk_indices + i_tg * 2 + 1).to(tl.int64)
    return i_c, tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)
