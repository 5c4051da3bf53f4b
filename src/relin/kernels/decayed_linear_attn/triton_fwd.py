"""Triton forward of decayed linear attention, in fla's chunk_local_cumsum / chunk_h / chunk_o decomposition.

Inputs are packed as [1, total tokens, H, D] with the call's ``ChunkTables``. Per chunk of BT positions, b is the
in-chunk cumulative log decay and R_ij = e^{b_i - b_j} on the causal triangle (notes/chunked-algorithms.md §1):
1. ``cumsum`` (with a decay): b for every chunk, all heads of a chunk in one program.
2. ``h``: the only serial pass; per (sequence, head, K block, V block) it walks the chunks, stores the state
   entering each chunk h[c] and carries S_C = e^{b_C} S_0 + (e^{b_C - b} K)ᵀ V; normalized, also the
   normalizer z_C = e^{b_C} z_0 + (e^{b_C - b} K)ᵀ 1 (stored per chunk in fp32).
3. ``o``: all chunks in parallel, O = scale · (e^b Q h[c] + (R ⊙ Q Kᵀ) V); normalized, the numerator
   e^b Q h[c] + (R ⊙ Q Kᵀ) V over the denominator e^b Q z[c] + rowsum(R ⊙ Q Kᵀ) + eps, both in fp32.

Precision with 16-bit inputs: products of raw inputs (Q Kᵀ, K V) take them as they are; the per-chunk states h
are stored in the input dtype, as in fla; other computed operands (decayed V, score tiles) are rounded to the
input dtype only with 64-wide key tiles (``low_operands``). The normalized output feeds its own gradient: the
backward subtracts do·o from do·v, two terms that cancel to ~eps/(q·k) of their size near a sequence start, so
o is computed to fp32 accuracy (the score tile enters its product with V as three 16-bit parts) and kept in fp32.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.backend import interpreting
from ..common.chunk_tables import CHUNK_SIZE, chunk_rows, locate_chunk, sequence_rows
from ..common.dot import dot, dot_mode
from ..common.triton_utils import autotune, load_state, state_tile, tile
from .ref import NORMALIZER_EPS

TL_DTYPES = {torch.float32: tl.float32, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}
# 16-bit computed operands (decayed V, score tiles) need 64-wide key tiles: with narrower ones Triton 3.6 on Hopper
# miscompiles the transposed-score products of the backward (fla issue #640; dk wrong at K = 20 on the H200).
LOW_OPERANDS_MIN_K = 64
# K and V tiles of the serial state passes and K tile of the dq/dk kernel; V tile of the output and dv kernels,
# where one tile holding all of V builds each chunk's score tile once instead of once per V tile.
STATE_TILE = 64
KEY_TILE = 64
VALUE_TILE = 128

_CONFIGS = [triton.Config({}, num_warps=w, num_stages=s) for w, s in ((4, 2), (8, 2), (4, 3))]


def low_operands(dtype: torch.dtype, k_dim: int) -> bool:
    """Whether computed dot operands are rounded to the (16-bit) input dtype rather than kept in fp32."""
    return dtype != torch.float32 and k_dim >= LOW_OPERANDS_MIN_K and not interpreting()


def state_dtype(dtype: torch.dtype) -> torch.dtype:
    """Per-chunk states (h, dh) in the input dtype; fp32 under the interpreter, which truncates fp32 to bf16
    where the GPU rounds to nearest."""
    return torch.float32 if interpreting() else dtype


def dot_args(dtype: torch.dtype, k_dim: int) -> dict:
    """The constexprs of the dot helper every kernel here takes: OP, the dtype of computed operands, and the
    precision and interpreter widening of ``common.dot.dot_mode``."""
    precision, widen = dot_mode(dtype)
    return dict(OP=TL_DTYPES[dtype] if low_operands(dtype, k_dim) else tl.float32, PRECISION=precision,
                WIDEN=widen)


@triton.jit
def load_state_z(s0, z0, i_nh, o_k, m_k, o_kv, m_kv, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr,
                 BV: tl.constexpr, LOAD: tl.constexpr, NORMALIZE: tl.constexpr):
    """The [BK, BV] state block and [BK] normalizer block (both fp32) a serial pass starts from: zeros, plus (when
    LOAD) those of state ``i_nh`` of s0 [N * H, K, V] and (when NORMALIZE) of z0 [N * H, K]."""
    b_s = load_state(s0, i_nh, o_kv, m_kv, K, V, BK, BV, LOAD)
    b_z = tl.zeros([BK], dtype=tl.float32)
    if LOAD:
        if NORMALIZE:
            b_z += tl.load(z0 + i_nh * K + o_k, mask=m_k, other=0.)
    return b_s, b_z


@triton.jit
def store_state_z(s, z, i, b_s, b_z, o_k, m_z, o_kv, m_kv, K: tl.constexpr, V: tl.constexpr,
                  NORMALIZE: tl.constexpr):
    """Store a state block in s's dtype as state ``i`` of s [*, K, V] and, when NORMALIZE, the normalizer block as
    entry i of z [*, K] (masked by ``m_z``: only the programs of the first V block store it)."""
    tl.store(s + i * K * V + o_kv, b_s.to(s.dtype.element_ty), mask=m_kv)
    if NORMALIZE:
        tl.store(z + i * K + o_k, b_z, mask=m_z)


@triton.jit
def dla_fwd_kernel_cumsum(g, gc, cu_seqlens, chunk_indices, H: tl.constexpr, BT: tl.constexpr, BH: tl.constexpr):
    """gc = cumulative sum of the log decay g [T, H] inside each chunk, fp32."""
    i_c = tl.cast(tl.program_id(0), tl.int64)
    i_t, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_c)
    r_t = bos + i_t * BT + tl.arange(0, BT)
    o_h = tl.arange(0, BH)
    m = (r_t < eos)[:, None] & (o_h < H)[None, :]
    p = r_t[:, None] * H + o_h[None, :]
    tl.store(gc + p, tl.cumsum(tl.load(g + p, mask=m, other=0.).to(tl.float32), axis=0), mask=m)


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G", "NORMALIZE"])
@triton.jit
def dla_fwd_kernel_h(k, v, gc, h, z, h0, z0, ht, zt, cu_seqlens, chunk_offsets,
                     H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                     BV: tl.constexpr, USE_G: tl.constexpr, USE_H0: tl.constexpr, STORE_HT: tl.constexpr,
                     NORMALIZE: tl.constexpr, OP: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    i_nh, i_k, i_v = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_nh, i_h, bos, eos, boh, NT = sequence_rows(cu_seqlens, chunk_offsets, i_nh, H, BT)
    o_t = tl.arange(0, BT)
    o_k, o_v, m_k, m_v, m_kv, o_kv = state_tile(i_k, i_v, K, V, BK, BV)
    m_z = o_k < tl.where(i_v == 0, K, 0)  # z does not depend on V: the first V block stores it
    b_h, b_z = load_state_z(h0, z0, i_nh, o_k, m_k, o_kv, m_kv, K, V, BK, BV, USE_H0, NORMALIZE)
    for i_s in range(0, NT):
        i_t = tl.cast(i_s, tl.int64)
        store_state_z(h, z, (boh + i_t) * H + i_h, b_h, b_z, o_k, m_z, o_kv, m_kv, K, V, NORMALIZE)
        r_t = bos + i_t * BT + o_t
        m_t = r_t < eos
        b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        b_v = tl.load(v + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0.)
        if NORMALIZE:
            # k loaded again (untransposed) for z, so that the dot operand b_kt has no elementwise reader (see the
            # output kernel)
            b_kz = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :],
                           other=0.).to(tl.float32)
        if USE_G:
            b_last = tl.load(gc + (tl.minimum(bos + i_t * BT + BT, eos) - 1) * H + i_h)
            b_g = tl.load(gc + r_t * H + i_h, mask=m_t, other=0.)
            b_decay = tl.where(m_t, tl.exp(b_last - b_g), 0.)
            b_h *= tl.exp(b_last)
            b_v = b_v * b_decay[:, None]
            if NORMALIZE:
                b_z = b_z * tl.exp(b_last) + tl.sum(b_kz * b_decay[:, None], 0)
        elif NORMALIZE:
            b_z += tl.sum(b_kz, 0)
        b_h += dot(b_kt, b_v, OP, PRECISION, WIDEN)
    if STORE_HT:
        store_state_z(ht, zt, i_nh, b_h, b_z, o_k, m_z, o_kv, m_kv, K, V, NORMALIZE)


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G", "NORMALIZE"])
@triton.jit
def dla_fwd_kernel_o(q, k, v, gc, h, z, o, o32, rden, cu_seqlens, chunk_indices, scale,
                     H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                     BV: tl.constexpr, USE_G: tl.constexpr, NORMALIZE: tl.constexpr, STORE_O32: tl.constexpr,
                     SPLIT_SCORES: tl.constexpr, EPS: tl.constexpr, OP: tl.constexpr, PRECISION: tl.constexpr,
                     WIDEN: tl.constexpr):
    """Normalized, also o32 (o in fp32, for the backward) and rden = 1 / (denominator + eps) [T, H] fp32."""
    IN = q.dtype.element_ty
    i_c, i_v, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_c, i_t, bos, eos, o_i, r_t, m_t = chunk_rows(chunk_indices, cu_seqlens, i_c, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    p_h = h + (i_c * H + i_h) * K * V

    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    b_qz = tl.zeros([BT], dtype=tl.float32)
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        b_q = tl.load(q + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)
        b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        b_h = tl.load(p_h + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.)
        b_o += dot(b_q, b_h, h.dtype.element_ty, PRECISION, WIDEN)
        b_A += dot(b_q, b_kt, IN, PRECISION, WIDEN)
        if NORMALIZE:
            # q loaded again (transposed) for q·z: with the dot operand b_q also read elementwise in this pipelined
            # loop, Triton 3.6 on the H200 computed Q Kᵀ wrong at 4 warps
            b_qt = tl.load(q + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
            b_z = tl.load(z + (i_c * H + i_h) * K + o_k, mask=m_k, other=0.)
            b_qz += tl.sum(b_qt.to(tl.float32) * b_z[:, None], 0)

    m_A = (o_i[:, None] >= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    if USE_G:
        b_g = tl.load(gc + r_t * H + i_h, mask=m_t, other=0.)
        b_o *= tl.exp(b_g)[:, None]
        b_qz *= tl.exp(b_g)
        b_A = tl.where(m_A, b_A * tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], 0.)), 0.)
    else:
        b_A = tl.where(m_A, b_A, 0.)
    b_v = tl.load(v + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0.)
    p_o = (r_t[:, None] * H + i_h) * V + o_v[None, :]
    m_o = m_t[:, None] & m_v[None, :]
    if NORMALIZE:
        if SPLIT_SCORES:
            # hi + mid + lo carry 24 mantissa bits of A; each part times the 16-bit V is exact in fp32
            b_hi = b_A.to(IN)
            b_rest = b_A - b_hi.to(tl.float32)
            b_mid = b_rest.to(IN)
            b_lo = (b_rest - b_mid.to(tl.float32)).to(IN)
            b_o += dot(b_hi, b_v, IN, PRECISION, WIDEN)
            b_o += dot(b_mid, b_v, IN, PRECISION, WIDEN)
            b_o += dot(b_lo, b_v, IN, PRECISION, WIDEN)
        else:
            b_o += dot(b_A, b_v, tl.float32, PRECISION, WIDEN)
        b_rden = 1. / (tl.sum(b_A, 1) + b_qz + EPS)
        b_o = b_o * b_rden[:, None]
        if STORE_O32:
            tl.store(o32 + p_o, b_o, mask=m_o)
        tl.store(rden + r_t * H + i_h, b_rden, mask=r_t < tl.where(i_v == 0, eos, 0))
    else:
        b_o = (b_o + dot(b_A, b_v, OP, PRECISION, WIDEN)) * scale
    tl.store(o + p_o, b_o.to(o.dtype.element_ty), mask=m_o)


def chunk_cumsum(g, tables):
    """In-chunk cumulative sums [1, T, H] fp32 of the log decay g [1, T, H]."""
    H = g.shape[-1]
    gc = torch.empty(g.shape, dtype=torch.float32, device=g.device)
    dla_fwd_kernel_cumsum[(tables.num_chunks,)](g, gc, tables.cu_seqlens, tables.chunk_indices, H=H, BT=CHUNK_SIZE,
                                                BH=triton.next_power_of_2(H))
    return gc


def chunk_fwd_h(k, v, gc, h0, z0, output_final_state, normalize, tables):
    """Per-chunk entering states h [NT, H, K, V] (``state_dtype``) and, normalized, z [NT, H, K] fp32; the final
    S [N, H, K, V] and z [N, H, K] fp32 (or None)."""
    _, _, H, K = k.shape
    V = v.shape[-1]
    BK, BV = tile(K, STATE_TILE), tile(V, STATE_TILE)
    NT, N = tables.num_chunks, tables.num_seqs
    h = torch.empty(NT, H, K, V, dtype=state_dtype(k.dtype), device=k.device)
    z = torch.empty(NT, H, K, dtype=torch.float32, device=k.device) if normalize else None
    ht = torch.empty(N, H, K, V, dtype=torch.float32, device=k.device) if output_final_state else None
    zt = torch.empty(N, H, K, dtype=torch.float32, device=k.device) if output_final_state and normalize else None
    dla_fwd_kernel_h[(N * H, triton.cdiv(K, BK), triton.cdiv(V, BV))](
        k, v, gc, h, z, h0, z0, ht, zt, tables.cu_seqlens, tables.chunk_offsets, H=H, K=K, V=V, BT=CHUNK_SIZE,
        BK=BK, BV=BV, USE_G=gc is not None, USE_H0=h0 is not None, STORE_HT=output_final_state, NORMALIZE=normalize,
        **dot_args(k.dtype, K))
    return h, z, ht, zt


def chunk_fwd_o(q, k, v, gc, h, z, scale, normalize, store_o32, tables):
    """o [1, T, H, V] in q's dtype; normalized, also o in fp32 (when ``store_o32``) and 1 / (denominator + eps)
    [1, T, H] fp32, else None, None."""
    _, _, H, K = q.shape
    V = v.shape[-1]
    BK, BV = tile(K, 64), tile(V, VALUE_TILE)
    o = torch.empty(v.shape, dtype=q.dtype, device=q.device)
    o32 = torch.empty(v.shape, dtype=torch.float32, device=q.device) if normalize and store_o32 else None
    rden = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device) if normalize else None
    dla_fwd_kernel_o[(tables.num_chunks, triton.cdiv(V, BV), H)](
        q, k, v, gc, h, z, o, o32, rden, tables.cu_seqlens, tables.chunk_indices, scale,
        H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=gc is not None, NORMALIZE=normalize,
        STORE_O32=o32 is not None, SPLIT_SCORES=q.dtype != torch.float32, EPS=NORMALIZER_EPS,
        **dot_args(q.dtype, K))
    return o, o32, rden
