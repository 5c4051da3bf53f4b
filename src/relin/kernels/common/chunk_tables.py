"""Chunk tables of the chunked kernels: every call is treated as variable-length.

A fixed-length batch [B, T] is the packed sequence [1, B·T] with cu_seqlens = (0, T, 2T, ...), so one set of
kernels serves both layouts. Per call, ``ChunkTables`` holds ``cu_seqlens`` [N+1] int64 (token offsets),
``chunk_indices`` [NT, 2] int32 ((sequence, chunk within it) for every chunk in packing order) and
``chunk_offsets`` [N+1] int64 (the index of each sequence's first chunk), all on the device, with NT and N.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import torch
import triton
import triton.language as tl

# Tokens per chunk of every chunked kernel and of the PyTorch chunked paths.
CHUNK_SIZE = 64


class ChunkTables(NamedTuple):
    cu_seqlens: torch.Tensor
    chunk_indices: torch.Tensor
    chunk_offsets: torch.Tensor
    num_chunks: int
    num_seqs: int


@functools.lru_cache(maxsize=64)
def _equal_length(batch: int, seq_len: int, device: torch.device) -> ChunkTables:
    count = -(-seq_len // CHUNK_SIZE)
    # Normal tensors even when first built under inference_mode: the ops save them for backward.
    with torch.inference_mode(False), torch.no_grad():
        sequences = torch.arange(batch + 1, dtype=torch.int64, device=device)
        chunk_indices = torch.stack((
            sequences[:-1].to(torch.int32).repeat_interleave(count),
            torch.arange(count, dtype=torch.int32, device=device).repeat(batch)), 1)
        return ChunkTables(sequences * seq_len, chunk_indices, sequences * count, batch * count, batch)


def _varlen(bounds: list[int], device: torch.device) -> ChunkTables:
    counts = [-(-(end - start) // CHUNK_SIZE) for start, end in zip(bounds[:-1], bounds[1:])]
    indices = [(n, c) for n, count in enumerate(counts) for c in range(count)]
    offsets = [0]
    for count in counts:
        offsets.append(offsets[-1] + count)
    pinned = device.type == "cuda"

    def upload(values, dtype):
        # Pinned host memory: a copy from pageable memory would wait for the stream to drain.
        return torch.tensor(values, dtype=dtype, pin_memory=pinned).to(device, non_blocking=True)

    chunk_indices = upload(indices, torch.int32).reshape(-1, 2)
    return ChunkTables(upload(bounds, torch.int64), chunk_indices, upload(offsets, torch.int64),
                       len(indices), len(bounds) - 1)


def chunk_tables(batch: int, seq_len: int, bounds: list[int] | None, device: torch.device) -> ChunkTables:
    """Tables for ``batch`` sequences of ``seq_len`` tokens (``bounds`` None; built on the device by arange and
    cached, so no host-device traffic), or for packed sequences with offsets ``bounds`` (cu_seqlens as a list)."""
    if bounds is None:
        return _equal_length(batch, seq_len, torch.device(device))
    return _varlen(bounds, torch.device(device))


def sequence_bounds(cu_seqlens: torch.Tensor | None, T: int, B: int) -> list[int] | None:
    """Check ``cu_seqlens`` (an integer tensor [N+1] rising from 0 to T, B = 1) and return it as a list.

    Reading a CUDA tensor here synchronizes with the device once; pass cu_seqlens on the CPU to avoid that.
    """
    if cu_seqlens is None:
        return None
    if B != 1:
        raise ValueError(f"cu_seqlens needs packed input with batch size B = 1; got B = {B}")
    if cu_seqlens.dim() != 1 or cu_seqlens.dtype not in (torch.int32, torch.int64) or cu_seqlens.numel() < 2:
        raise ValueError(
            f"cu_seqlens must be an integer tensor [N+1]; got {cu_seqlens.dtype} {tuple(cu_seqlens.shape)}")
    bounds = cu_seqlens.tolist()
    if bounds[0] != 0 or bounds[-1] != T or any(b < a for a, b in zip(bounds[:-1], bounds[1:])):
        raise ValueError(f"cu_seqlens must rise from 0 to T = {T}; got {bounds}")
    return bounds


@triton.jit
def locate_chunk(chunk_indices, cu_seqlens, i_tg):
    """Device side: (chunk index within its sequence, sequence start, sequence end) of global chunk ``i_tg``,
    all int64."""
    i_n = tl.load(chunk_indices + i_tg * 2).to(tl.int64)
    i_c = tl.load(chunk_indices + i_tg * 2 + 1).to(tl.int64)
    return i_c, tl.load(cu_seqlens + i_n).to(tl.int64), tl.load(cu_seqlens + i_n + 1).to(tl.int64)


@triton.jit
def locate_sequence(cu_seqlens, chunk_offsets, i_n):
    """Device side: (sequence start, sequence end, index of its first chunk) of sequence ``i_n``, all int64."""
    bos = tl.load(cu_seqlens + i_n).to(tl.int64)
    eos = tl.load(cu_seqlens + i_n + 1).to(tl.int64)
    return bos, eos, tl.load(chunk_offsets + i_n).to(tl.int64)


@triton.jit
def chunk_rows(chunk_indices, cu_seqlens, i_tg, BT: tl.constexpr):
    """Device side: for the program of global chunk ``i_tg``, (i_tg as int64, chunk index within its sequence,
    sequence start, sequence end, offsets 0..BT-1 in the chunk, token rows of the chunk, mask of rows < end)."""
    i_tg = tl.cast(i_tg, tl.int64)
    i_c, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_tg)
    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    return i_tg, i_c, bos, eos, o_t, r_t, r_t < eos


@triton.jit
def sequence_rows(cu_seqlens, chunk_offsets, i_nh, H: tl.constexpr, BT: tl.constexpr):
    """Device side: for the program of (sequence x head) ``i_nh``, (i_nh as int64, head, sequence start, sequence
    end, index of its first chunk, number of its chunks)."""
    i_nh = tl.cast(i_nh, tl.int64)
    i_n, i_h = i_nh // H, i_nh % H
    bos, eos, boh = locate_sequence(cu_seqlens, chunk_offsets, i_n)
    return i_nh, i_h, bos, eos, boh, tl.cdiv(eos - bos, BT)
