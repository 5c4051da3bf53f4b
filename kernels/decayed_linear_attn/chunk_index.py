"""Chunk bookkeeping shared by the Triton kernels: every call is treated as variable-length.

A fixed-length batch [B, T] is the packed sequence [1, B·T] with cu_seqlens = (0, T, 2T, ...), so one
set of kernels serves both layouts.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ChunkIndex:
    cu_seqlens: torch.Tensor     # int64 [N+1], token offsets of the packed sequences
    chunk_indices: torch.Tensor  # int32 [NT, 2], (sequence, chunk within sequence) per global chunk
    chunk_offsets: torch.Tensor  # int64 [N+1], global index of each sequence's first chunk
    num_chunks: int
    num_seqs: int


def build_chunk_index(batch: int, seq_len: int, cu_seqlens: torch.Tensor | None, chunk_size: int,
                      device: torch.device) -> ChunkIndex:
    """From a fixed [batch, seq_len] layout (cu_seqlens None) or FlashAttention-style cu_seqlens."""
    if cu_seqlens is None:
        lengths = [seq_len] * batch
        cu_seqlens = torch.arange(batch + 1, device=device, dtype=torch.int64) * seq_len
    else:
        lengths = cu_seqlens.diff().tolist()
        cu_seqlens = cu_seqlens.to(device=device, dtype=torch.int64)
    chunks = [-(-n // chunk_size) for n in lengths]
    seq = torch.repeat_interleave(torch.arange(len(lengths)), torch.tensor(chunks, dtype=torch.int64))
    first = torch.tensor([0] + chunks, dtype=torch.int64).cumsum(0)
    within = torch.arange(int(first[-1])) - first[seq]
    chunk_indices = torch.stack([seq, within], dim=1).to(device=device, dtype=torch.int32)
    return ChunkIndex(cu_seqlens=cu_seqlens, chunk_indices=chunk_indices.contiguous(),
                      chunk_offsets=first.to(device),
                      num_chunks=int(first[-1]), num_seqs=len(lengths))
