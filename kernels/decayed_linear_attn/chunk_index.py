"""The chunk tables of one call (``common.chunk_tables``) with their sizes, as the launchers take them."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..common.chunk_tables import equal_length_chunks, varlen_chunks


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
        cu_seqlens, chunk_indices, chunk_offsets = equal_length_chunks(batch, seq_len, chunk_size, device)
        return ChunkIndex(cu_seqlens, chunk_indices, chunk_offsets, batch * -(-seq_len // chunk_size), batch)
    chunk_indices, chunk_offsets = varlen_chunks(cu_seqlens.cpu(), chunk_size, device)
    return ChunkIndex(cu_seqlens.to(device=device, dtype=torch.int64), chunk_indices, chunk_offsets,
                      chunk_indices.shape[0], cu_seqlens.numel() - 1)
