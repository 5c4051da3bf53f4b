"""Triton forward of decayed linear attention, in fla's chunk_h / chunk_o decomposition.

Inputs are packed as [1, total tokens, H, D] with cu_seqlens (see ``chunk_index``). Per chunk of BT
positions, b is the in-chunk cumulative log decay (notes/chunked-algorithms.md §1):
1. ``chunk_fwd_h_kernel``: the only serial pass; per (sequence, head, K-block, V-block) it walks the
   chunks, stores the state entering each chunk h[c] and carries S_C = e^{b_C} S_0 + (e^{b_C - b} K)ᵀ V.
   It takes b = cumsum of g inside each chunk (fp32) itself and stores it for the kernels after it: one
   launch fewer (H200 host time per forward 0.41 -> 0.37 ms) for a slower serial loop (0.22 -> 0.28 ms at
   (1, 16K, 16, 256, 128); benchmarks/notes/dla-msr-h200.md, session 5).
2. ``chunk_fwd_o_kernel``: all chunks in parallel, O = scale · (e^b Q h[c] + tril(e^{b_i - b_j} Q Kᵀ) V).

Precision with 16-bit inputs: products of raw inputs (Q Kᵀ) run in the input dtype; the states h are
stored in the input dtype as in fla (H200, bf16, T = 300, H = 16, K = 256, V = 128: o 1.7e-3, dq 2.4e-3,
dg 1.6e-3 relative RMS from the fp32 reference, against 1.7e-3, 2.4e-3, 1.4e-3 with fp32 states), and the
other computed operands (decayed V, decayed score tile) stay fp32 (tf32) unless LOW_OPERANDS.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import interpreting
from ..common.interpreter_dot import dot_mode, mma
from ..common.triton_utils import autotune

CHUNK_SIZE = 64

_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w, s in ((4, 2), (8, 2), (4, 3))]


def dot_args(dtype: torch.dtype, k_dim: int, precise: bool = False) -> dict:
    """The DOT_PRECISION / DOT_WIDEN / LOW constexprs every kernel here takes (see ``common.interpreter_dot``).

    ``precise`` (fp32 operands only): tf32x3 on the GPU, three tensor-core products with fp32 accuracy,
    instead of ieee's CUDA-core FMAs. LOW (16-bit computed operands) needs ``k_dim >= LOW_OPERANDS_MIN_K``.
    """
    precision, widen = dot_mode(dtype)
    if precise:
        if dtype != torch.float32:
            raise ValueError(f"precise products need fp32 operands; got {dtype}")
        precision = "ieee" if interpreting() else "tf32x3"
    low = LOW_OPERANDS and k_dim >= LOW_OPERANDS_MIN_K and not interpreting()
    return dict(DOT_PRECISION=precision, DOT_WIDEN=widen, LOW=low)


@triton.jit
def operand(x, raw, LOW: tl.constexpr):
    """x as a dot operand: in the dtype of the raw input tile ``raw`` when LOW, else fp32."""
    dtype: tl.constexpr = raw.dtype if LOW else tl.float32
    return x.to(dtype)


# Precision and tiling policy for 16-bit inputs, read at launch (fp32 inputs keep fp32 everywhere).
# LOW_STATES stores the per-chunk states h and dh in the input dtype (fp32 accumulation either way);
# LOW_OPERANDS rounds computed dot operands (decayed V, K, Q and score tiles) to the input dtype instead of
# tf32. STATE_TILE is the K and V tile of the two serial state passes; KEY_TILE the K tile of dq, dk;
# VALUE_TILE the V tile of the output and dv with 16-bit operands (see ``value_tile``). SAVE_STATES keeps
# the forward's h for the backward instead of recomputing it (memory: T/64 · H · K · V elements). The CPU
# interpreter (triton 3.9) truncates fp32 to bf16 where the GPU rounds to nearest, so under it states and
# operands stay fp32.
# LOW_OPERANDS_MIN_K: below it, 16-bit operands hit the Triton 3.4-3.7.0 Hopper miscompile of fla #640 (dk
# 79-114% off at K = 20 on the H200; every K with 64-wide tiles passed; fp32 operands pass everywhere).
# Measured gains at (1, 16K, 16, K=256, V=128) and the history: benchmarks/notes/dla-msr-h200.md.
LOW_STATES = True
LOW_OPERANDS = True
LOW_OPERANDS_MIN_K = 64
STATE_TILE = 64
KEY_TILE = 64
VALUE_TILE = 128
SAVE_STATES = True


def state_dtype(input_dtype: torch.dtype) -> torch.dtype:
    low = LOW_STATES and input_dtype != torch.float32 and not interpreting()
    return input_dtype if low else torch.float32


def block_size(dim: int, cap: int = 64) -> int:
    """Tile width along a feature dim: a power of two in [16, cap] (tl.dot needs ≥ 16)."""
    return min(cap, max(16, triton.next_power_of_2(dim)))


def value_tile(V: int, low: bool) -> int:
    """V tile of ``chunk_fwd_o`` and ``chunk_bwd_dv``: all of V in one tile when it fits in VALUE_TILE and the
    operands are 16-bit, so each chunk builds its score tile once rather than once per V tile (H200, K = 256,
    V = 128: output 0.208 -> 0.177 ms, dv 0.214 -> 0.178); else 64 (fp32 operands at 128 took dv 1.50 -> 3.69 ms,
    and V = 129 at 128 wastes a nearly empty second tile)."""
    return block_size(V, VALUE_TILE if low and V <= VALUE_TILE else 64)


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G", "CUMSUM"])
@triton.jit
def chunk_fwd_h_kernel(k, v, g, gc, h, h0, ht, cu_seqlens, chunk_offsets,
                       H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                       BK: tl.constexpr, BV: tl.constexpr, USE_G: tl.constexpr, CUMSUM: tl.constexpr,
                       USE_H0: tl.constexpr, STORE_HT: tl.constexpr, DOT_PRECISION: tl.constexpr,
                       DOT_WIDEN: tl.constexpr, LOW: tl.constexpr):
    """With CUMSUM, reads the raw decay g and writes its chunk cumsum to gc (program (·, 0, 0)); else reads gc."""
    i_nh, i_k, i_v = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n, i_h = i_nh // H, i_nh % H
    bos, eos = tl.load(cu_seqlens + i_n), tl.load(cu_seqlens + i_n + 1)
    T = eos - bos
    NT = tl.cdiv(T, BT)
    boh = tl.load(chunk_offsets + i_n)

    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    o_kv = o_k[:, None] * V + o_v[None, :]
    m_kv = m_k[:, None] & m_v[None, :]

    b_h = tl.zeros([BK, BV], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + tl.cast(i_nh, tl.int64) * K * V + o_kv, mask=m_kv, other=0.).to(tl.float32)
    for i_t in range(0, NT):
        i_t64 = tl.cast(i_t, tl.int64)
        tl.store(h + ((boh + i_t64) * H + i_h) * K * V + o_kv, b_h.to(h.dtype.element_ty), mask=m_kv)
        o_t = i_t64 * BT + tl.arange(0, BT)
        m_t = o_t < T
        # k loaded transposed, [BK, BT]
        b_kt = tl.load(k + ((bos + o_t[None, :]) * H + i_h) * K + o_k[:, None],
                       mask=m_k[:, None] & m_t[None, :], other=0.)
        b_v = tl.load(v + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :],
                      mask=m_t[:, None] & m_v[None, :], other=0.)
        if USE_G:
            last = tl.minimum(i_t64 * BT + BT, T) - 1
            if CUMSUM:
                b_g = tl.cumsum(tl.load(g + (bos + o_t) * H + i_h, mask=m_t, other=0.).to(tl.float32), axis=0)
                b_g_last = tl.sum(tl.where(o_t == last, b_g, 0.), axis=0)
                if (i_k == 0) & (i_v == 0):
                    tl.store(gc + (bos + o_t) * H + i_h, b_g, mask=m_t)
            else:
                b_g_last = tl.load(gc + (bos + last) * H + i_h)
                b_g = tl.load(gc + (bos + o_t) * H + i_h, mask=m_t, other=0.)
            b_h *= tl.exp(b_g_last)
            b_v = b_v * tl.where(m_t, tl.exp(b_g_last - b_g), 0.)[:, None]
        b_h += mma(operand(b_kt, b_kt, LOW), operand(b_v, b_kt, LOW), DOT_PRECISION, DOT_WIDEN)
    if STORE_HT:
        tl.store(ht + tl.cast(i_nh, tl.int64) * K * V + o_kv, b_h, mask=m_kv)


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G"])
@triton.jit
def chunk_fwd_o_kernel(q, k, v, gc, h, o, cu_seqlens, chunk_indices, scale,
                       H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                       BK: tl.constexpr, BV: tl.constexpr, USE_G: tl.constexpr, DOT_PRECISION: tl.constexpr,
                       DOT_WIDEN: tl.constexpr, LOW: tl.constexpr):
    i_c, i_v, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_n = tl.load(chunk_indices + i_c * 2)
    i_t = tl.cast(tl.load(chunk_indices + i_c * 2 + 1), tl.int64)
    bos, eos = tl.load(cu_seqlens + i_n), tl.load(cu_seqlens + i_n + 1)
    T = eos - bos
    o_i = tl.arange(0, BT)
    o_t = i_t * BT + o_i
    m_t = o_t < T
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    p_h = h + (tl.cast(i_c, tl.int64) * H + i_h) * K * V

    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = tl.cast(i_k, tl.int64) * BK + tl.arange(0, BK)
        m_k = o_k < K
        b_q = tl.load(q + ((bos + o_t[:, None]) * H + i_h) * K + o_k[None, :],
                      mask=m_t[:, None] & m_k[None, :], other=0.)
        b_kt = tl.load(k + ((bos + o_t[None, :]) * H + i_h) * K + o_k[:, None],
                       mask=m_k[:, None] & m_t[None, :], other=0.)
        b_h = tl.load(p_h + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.)
        b_o += mma(b_q.to(b_h.dtype), b_h, DOT_PRECISION, DOT_WIDEN)
        b_A += mma(b_q, b_kt, DOT_PRECISION, DOT_WIDEN)

    m_A = (o_i[:, None] >= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    if USE_G:
        b_g = tl.load(gc + (bos + o_t) * H + i_h, mask=m_t, other=0.)
        b_o *= tl.exp(b_g)[:, None]
        b_A = tl.where(m_A, b_A * tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], 0.)), 0.)
    else:
        b_A = tl.where(m_A, b_A, 0.)
    b_v = tl.load(v + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :],
                  mask=m_t[:, None] & m_v[None, :], other=0.)
    b_o += mma(operand(b_A, b_v, LOW), operand(b_v, b_v, LOW), DOT_PRECISION, DOT_WIDEN)
    tl.store(o + ((bos + o_t[:, None]) * H + i_h) * V + o_v[None, :], (b_o * scale).to(o.dtype.element_ty),
             mask=m_t[:, None] & m_v[None, :])


def chunk_fwd_h(k, v, g, initial_state, output_final_state, index, precise=False, cumsum=True):
    """Per-chunk entering states h [NT, H, K, V] (``state_dtype``), the final state [N, H, K, V] fp32 or None,
    and the in-chunk cumulative decay gc [1, T, H] fp32 (None without decay).

    g [1, T, H] is the raw log decay when ``cumsum``, else an earlier call's gc (returned as given).
    """
    _, _, H, K = k.shape
    V = v.shape[-1]
    BK, BV = block_size(K, STATE_TILE), block_size(V, STATE_TILE)
    h = torch.empty(index.num_chunks, H, K, V, dtype=state_dtype(k.dtype), device=k.device)
    ht = torch.empty(index.num_seqs, H, K, V, dtype=torch.float32, device=k.device) if output_final_state else None
    gc = torch.empty(g.shape, dtype=torch.float32, device=g.device) if g is not None and cumsum else g
    grid = (index.num_seqs * H, triton.cdiv(K, BK), triton.cdiv(V, BV))
    chunk_fwd_h_kernel[grid](k, v, g, gc, h, initial_state, ht, index.cu_seqlens, index.chunk_offsets,
                             H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=g is not None, CUMSUM=cumsum,
                             USE_H0=initial_state is not None, STORE_HT=output_final_state,
                             **dot_args(k.dtype, K, precise))
    return h, ht, gc


def chunk_fwd_o(q, k, v, gc, h, scale, index, out_dtype):
    """o [1, T, H, V] in out_dtype."""
    _, _, H, K = q.shape
    V = v.shape[-1]
    dots = dot_args(q.dtype, K)
    BK, BV = block_size(K), value_tile(V, dots["LOW"])
    o = torch.empty(*v.shape, dtype=out_dtype, device=v.device)
    grid = (index.num_chunks, triton.cdiv(V, BV), H)
    chunk_fwd_o_kernel[grid](q, k, v, gc, h, o, index.cu_seqlens, index.chunk_indices, scale,
                             H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=gc is not None, **dots)
    return o
