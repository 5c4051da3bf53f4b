"""Split-K decode attention ("flash-decoding", Dao et al. 2023) over a static KV cache, for grouped-query heads
without copying K/V and reading only the filled slots.

Pass 1: one program per (row, key/value head, split of the slots) computes, for the G query heads of its group
together, the softmax-weighted sum over its split's filled slots (online softmax, exp2) and the split's
log-sum-exp; a split wholly past ``length`` (or before ``start``) exits after writing an empty partial. Pass 2: one
program per (row, query head) merges the splits by their log-sum-exps. The grid depends only on the cache's
shape, and ``length`` / ``start`` are read on the device, so a decode step stays capturable in a CUDA graph.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import interpreting, use_triton
from ..common.dot import dot, dot_mode
from ..common.triton_utils import MIN_TILE
from .ref import MAX_HEAD_DIM, check_inputs, naive_decode_attention

LOG2E = 1.4426950408889634
# Slots per inner tile: the N of the q·kᵀ product (≥ 64, see MIN_TILE) and the K of p·v; half as many for rows
# wider than 512 bytes (fp32 at D > 128), whose [BLOCK_T, D] key and value tiles would not fit shared memory.
BLOCK_T = 64
# Programs of pass 1 to aim for per multiprocessor: enough splits to keep the memory system busy at small batches.
PROGRAMS_PER_SM = 8
TRITON_DTYPES = {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}


@triton.jit(do_not_specialize=["T_MAX", "SPLIT", "NUM_SPLITS"])
def decode_attn_split_kernel(
    q, k, v, o_part, lse_part, length, start, qk_scale, T_MAX, SPLIT, NUM_SPLITS,
    H: tl.constexpr, H_KV: tl.constexpr, G: tl.constexpr, D: tl.constexpr, BG: tl.constexpr, BD: tl.constexpr,
    BT: tl.constexpr, HAS_START: tl.constexpr, DT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    i_bk, i_s = tl.cast(tl.program_id(0), tl.int64), tl.cast(tl.program_id(1), tl.int64)
    i_b, i_hk = i_bk // H_KV, i_bk % H_KV
    filled = tl.load(length)
    first = tl.load(start + i_b) if HAS_START else 0
    lo = tl.maximum(i_s * SPLIT, first)
    hi = tl.minimum((i_s + 1) * SPLIT, filled)
    o_g, o_d, o_t = tl.arange(0, BG), tl.arange(0, BD), tl.arange(0, BT)
    m_g, m_d = o_g < G, o_d < D
    rows = i_b * H + i_hk * G + o_g                                   # query heads of this group, [BG]
    b_q = tl.load(q + rows[:, None] * D + o_d[None, :], mask=m_g[:, None] & m_d[None, :], other=0.)
    b_m = tl.full([BG], float("-inf"), tl.float32)
    b_l = tl.zeros([BG], dtype=tl.float32)
    b_acc = tl.zeros([BG, BD], dtype=tl.float32)
    base = i_bk * T_MAX * D
    for t0 in range(lo, hi, BT):
        t = t0 + o_t
        m_t = t < hi
        m_kv = m_t[:, None] & m_d[None, :]
        b_k = tl.load(k + base + t[:, None] * D + o_d[None, :], mask=m_kv, other=0.)
        b_s = dot(b_q, tl.trans(b_k), DT, PRECISION, WIDEN) * qk_scale          # [BG, BT], log2 units
        b_s = tl.where(m_t[None, :], b_s, float("-inf"))
        m_new = tl.maximum(b_m, tl.max(b_s, 1))
        alpha = tl.exp2(b_m - m_new)
        b_p = tl.exp2(b_s - m_new[:, None])
        b_l = b_l * alpha + tl.sum(b_p, 1)
        b_v = tl.load(v + base + t[:, None] * D + o_d[None, :], mask=m_kv, other=0.)
        b_acc = b_acc * alpha[:, None] + dot(b_p, b_v, DT, PRECISION, WIDEN)
        b_m = m_new
    empty = b_l == 0.
    b_o = b_acc / tl.where(empty, 1., b_l)[:, None]
    b_lse = tl.where(empty, float("-inf"), b_m + tl.log2(tl.where(empty, 1., b_l)))
    slot = rows * NUM_SPLITS + i_s
    tl.store(o_part + slot[:, None] * D + o_d[None, :], b_o, mask=m_g[:, None] & m_d[None, :])
    tl.store(lse_part + slot, b_lse, mask=m_g)


@triton.jit(do_not_specialize=["NUM_SPLITS"])
def decode_attn_combine_kernel(o_part, lse_part, o, NUM_SPLITS, D: tl.constexpr, BD: tl.constexpr,
                               BS: tl.constexpr):
    i_bh = tl.cast(tl.program_id(0), tl.int64)
    o_s, o_d = tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < NUM_SPLITS, o_d < D
    b_lse = tl.load(lse_part + i_bh * NUM_SPLITS + o_s, mask=m_s, other=float("-inf"))
    b_max = tl.maximum(tl.max(b_lse, 0), -1e30)                      # a row with no filled slot: every weight 0
    b_w = tl.exp2(b_lse - b_max)
    b_part = tl.load(o_part + (i_bh * NUM_SPLITS + o_s)[:, None] * D + o_d[None, :],
                     mask=m_s[:, None] & m_d[None, :], other=0.)
    b_o = tl.sum(b_part * b_w[:, None], 0) / tl.maximum(tl.sum(b_w, 0), 1e-30)
    tl.store(o + i_bh * D + o_d, b_o.to(o.dtype.element_ty), mask=m_d)


def split_size(batch: int, kv_heads: int, max_length: int, device: torch.device) -> int:
    """Slots per split (a multiple of BLOCK_T): about PROGRAMS_PER_SM programs of pass 1 per multiprocessor when
    the cache is full. Depends only on shapes, so a captured graph's grid stays valid."""
    sms = (1 if interpreting() or device.type != "cuda"
           else torch.cuda.get_device_properties(device).multi_processor_count)
    splits = max(1, min(triton.cdiv(PROGRAMS_PER_SM * sms, batch * kv_heads), triton.cdiv(max_length, BLOCK_T)))
    return triton.cdiv(triton.cdiv(max_length, splits), BLOCK_T) * BLOCK_T


def block_slots(row_bytes: int) -> int:
    return BLOCK_T if row_bytes <= 512 else BLOCK_T // 2


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, length: torch.Tensor,
                     start: torch.Tensor | None = None, scale: float | None = None,
                     backend: str | None = None) -> torch.Tensor:
    """Attention of one new query per row over a static cache.

    Args:
        q: ``[B, H, D]``, the step's queries (rotated).
        k_cache, v_cache: ``[B, H_kv, T_max, D]`` contiguous, ``H`` a multiple of ``H_kv``; read in place.
        length: 0-d int64 device tensor, the slots filled (the query's own key included).
        start: ``[B]`` int64, each row's first real slot (left padding); None for 0.
        scale: score scale; ``D ** -0.5`` by default.
        backend: ``auto`` | ``triton`` | ``torch`` (see ``relin.kernels.common.backend``).

    Returns ``o [B, H, D]`` in q's dtype (fp32 accumulation). Forward only: decoding needs no gradient.
    """
    check_inputs(q, k_cache, v_cache, length, start)
    if not use_triton(q, backend):
        return naive_decode_attention(q, k_cache, v_cache, length, start, scale)
    B, H, D = q.shape
    H_kv, T_max = k_cache.shape[1], k_cache.shape[2]
    if not 1 <= D <= MAX_HEAD_DIM:
        raise ValueError(f"D = {D}: the Triton decode kernel supports head dims 1 to {MAX_HEAD_DIM}")
    if not (k_cache.is_contiguous() and v_cache.is_contiguous()):
        raise ValueError("k_cache and v_cache must be contiguous (a static cache's buffers are; a copy would "
                         "read the whole cache)")
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k_cache, v_cache)):
        raise NotImplementedError("decode_attention has no backward; train with the attention layer's full path")
    scale = D ** -0.5 if scale is None else scale
    groups = H // H_kv
    split = split_size(B, H_kv, T_max, q.device)
    num_splits = triton.cdiv(T_max, split)
    q = q.contiguous()
    o_part = torch.empty(B, H, num_splits, D, dtype=torch.float32, device=q.device)
    lse_part = torch.empty(B, H, num_splits, dtype=torch.float32, device=q.device)
    o = torch.empty_like(q)
    BD = max(triton.next_power_of_2(D), MIN_TILE)
    dtype = k_cache.dtype
    precision, widen = dot_mode(dtype)
    decode_attn_split_kernel[(B * H_kv, num_splits)](
        q, k_cache, v_cache, o_part, lse_part, length, start if start is not None else length, scale * LOG2E,
        T_max, split, num_splits, H=H, H_KV=H_kv, G=groups, D=D, BG=max(16, triton.next_power_of_2(groups)), BD=BD,
        BT=block_slots(BD * k_cache.element_size()), HAS_START=start is not None, DT=TRITON_DTYPES[dtype],
        PRECISION=precision, WIDEN=widen, num_warps=4)
    decode_attn_combine_kernel[(B * H,)](o_part, lse_part, o, num_splits, D=D, BD=BD,
                                         BS=max(2, triton.next_power_of_2(num_splits)), num_warps=4)
    return o
