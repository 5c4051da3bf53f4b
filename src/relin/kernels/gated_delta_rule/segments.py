"""Intra-card context parallelism for the serial passes of the chunked gated delta rule.

The forward state pass and the backward state-gradient pass walk the chunks of each sequence one after another,
one program per (sequence x head, V block): at B = 1 and 16 heads that is a few dozen programs on 132 SMs, each
taking T / 64 dependent steps. Here each long sequence is cut into segments of ``L`` chunks that run side by side,
in three steps per pass (FlashQLA's "gate-driven automatic intra-card context parallelism", made exact):

1. ``carry`` (parallel over segments): each segment's contribution to the state it hands on, run from a zero
   state over its last chunks only (first chunks, backward) -- as few as the gates allow. Over chunk c the state
   is mapped by A_c = gamma_C (I - K^T diag(gamma_C / gamma) W) (notes/chunked-algorithms.md section 2), whose
   spectral norm is at most exp(sum_t g_t + log max(1, |1 - beta_t |k_t|^2|)) (each I - beta k k^T has
   eigenvalues 1 and 1 - beta |k|^2): ``chunk_bound`` holds that exponent per chunk. Where the exponents of the
   chunks a carry leaves out sum below ``TRUNCATION_LOG_BOUND`` (a factor under 1e-14, eight orders below fp32's
   rounding of the state), what they would add is dropped; where no suffix (prefix) of the segment gets there,
   the carry runs over the whole segment and the segment's transition matrix (A_L ... A_1, or its transpose
   backward) is computed beside it, so the result stays exact: the "fallback" of FlashQLA's scheme, whose
   threshold (e^-10) is an approximation this one avoids.
2. ``resolve`` (parallel over segments): the state entering each segment (the state gradient leaving it,
   backward): the carry of the nearest earlier segment that needed no transition, then the transitions of any
   fallback segments in between.
3. The unchanged serial pass, one program per (segment x head, V block), from the resolved states.

``RELIN_GDN_CP`` chooses: ``auto`` (the default) decides from the sequence lengths alone (no device
synchronisation) with FlashQLA's Hopper rule where it pays on an H100: split when the longest sequence has at least
``MIN_CHUNKS`` chunks and the sequences' chunks spread over few (sequence x head) programs (B_eff x H <= 40, or <= 56
with a sequence of at least 128 chunks; B_eff = all chunks / the longest sequence's), into segments of
L = 2^round(log2(3 sqrt(H x chunks / SMs))) chunks, at least 4; ``0`` walks whole sequences; a power of two L
always splits into segments of L chunks.
"""
from __future__ import annotations

import functools
import math
import os
from typing import NamedTuple

import torch
import triton

from ..common.chunk_tables import CHUNK_SIZE

# A carry may leave out chunks whose transition norm bound is below exp(TRUNCATION_LOG_BOUND) ~ 1.3e-14.
TRUNCATION_LOG_BOUND = -32.0
# RELIN_GDN_CP when unset.
DEFAULT_MODE = "auto"
# Shorter sequences walk whole under "auto": on an H100 at 16 heads of 128 x 128 a (1, 4K) call pays more for the
# carry and resolve launches than the parallel state pass saves (gdn_public: 1.6x the wall time forward, the same
# device time); from (1, 16K) the segments take 0.86-0.92x of it, forward and forward+backward.
MIN_CHUNKS = 256
_DEFAULT_SMS = 132  # under the interpreter: an H100 / H200


class SegmentPlan(NamedTuple):
    """Segments of L chunks cut from the sequences of one call, on the device.

    cu_seqlens [NS+1] int64: token offsets of the segments (the chunk tables' layout, so the serial kernels run on
    segments as on sequences); chunk_offsets [NS+1] int64: the global index of each segment's first chunk;
    info [NS, 3] int32: (sequence, its first segment, its last segment); first / last [N] int64: the first and last
    segment of each sequence; num_segments NS; chunks L (a power of two); max_segments: the most segments of one
    sequence, as a power of two.
    """
    cu_seqlens: torch.Tensor
    chunk_offsets: torch.Tensor
    info: torch.Tensor
    first: torch.Tensor
    last: torch.Tensor
    num_segments: int
    chunks: int
    max_segments: int


def _multiprocessors(device: torch.device) -> int:
    if device.type != "cuda":
        return _DEFAULT_SMS
    return _sm_count(device.index if device.index is not None else torch.cuda.current_device())


@functools.lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def chunks_per_segment(lengths: list[int], heads: int, device: torch.device, mode: str | None = None) -> int | None:
    """L for these sequence lengths, or None when the call should not be split (``mode``, by default the variable
    ``RELIN_GDN_CP``, first)."""
    mode = (os.environ.get("RELIN_GDN_CP", DEFAULT_MODE) if mode is None else mode).strip().lower()
    if mode in ("0", "off", "no", "false"):
        return None
    chunks = [-(-n // CHUNK_SIZE) for n in lengths]
    longest = max(chunks, default=0)
    if mode not in ("", "auto"):
        if not mode.isdigit() or int(mode) & (int(mode) - 1):
            raise ValueError(f"RELIN_GDN_CP={mode!r}: expected auto, 0 or a power of two (chunks per segment)")
        L = int(mode)
        return L if longest > L else None
    if longest < MIN_CHUNKS:
        return None
    total = sum(chunks)
    spread = total / longest * heads
    if not (spread <= 40 or (spread <= 56 and longest >= 128)):
        return None
    L = max(4, 2 ** round(math.log2(math.sqrt(heads * total / _multiprocessors(device)) * 3)))
    return L if longest > L else None


def segment_plan(batch: int, seq_len: int, bounds: list[int] | None, heads: int,
                 device: torch.device) -> SegmentPlan | None:
    """The segments of a call of ``batch`` sequences of ``seq_len`` tokens (``bounds`` None) or of packed sequences
    with offsets ``bounds``, or None when the serial passes should walk whole sequences. Cached: a repeated call
    costs one lookup."""
    return _plan(batch, seq_len, None if bounds is None else tuple(bounds), heads, torch.device(device),
                 os.environ.get("RELIN_GDN_CP", DEFAULT_MODE))


@functools.lru_cache(maxsize=128)
def _plan(batch: int, seq_len: int, bounds: tuple[int, ...] | None, heads: int, device: torch.device,
          mode: str) -> SegmentPlan | None:
    starts = tuple(n * seq_len for n in range(batch + 1)) if bounds is None else bounds
    L = chunks_per_segment([e - s for s, e in zip(starts[:-1], starts[1:])], heads, device, mode)
    if L is None:
        return None
    return _build(starts, L, device)


@functools.lru_cache(maxsize=64)
def _build(starts: tuple[int, ...], L: int, device: torch.device) -> SegmentPlan:
    span = L * CHUNK_SIZE
    cu, offsets, info, first, last = [], [0], [], [], []
    for n, (s, e) in enumerate(zip(starts[:-1], starts[1:])):
        first.append(len(cu))
        pieces = list(range(s, e, span)) or [s]  # an empty sequence keeps one (empty) segment
        for p in pieces:
            cu.append(p)
            offsets.append(offsets[-1] + -(-(min(p + span, e) - p) // CHUNK_SIZE))
        last.append(len(cu) - 1)
        info += [(n, first[-1], last[-1])] * len(pieces)
    cu.append(starts[-1])
    pinned = device.type == "cuda"
    most = max(b - a + 1 for a, b in zip(first, last))

    def upload(values, dtype):
        # Pinned host memory: a copy from pageable memory would wait for the stream to drain.
        return torch.tensor(values, dtype=dtype, pin_memory=pinned).to(device, non_blocking=True)

    # Normal tensors even when first built under inference_mode: the backward reads them.
    with torch.inference_mode(False), torch.no_grad():
        return SegmentPlan(upload(cu, torch.int64), upload(offsets, torch.int64),
                           upload(info, torch.int32).reshape(-1, 3), upload(first, torch.int64),
                           upload(last, torch.int64), len(cu) - 1, L, triton.next_power_of_2(most))
