"""Triton backward of decayed linear attention: fla's chunk_bwd_dh / chunk_bwd_dv / chunk_bwd_dqk split, with dg
formed inside the dq/dk kernel.

Per chunk, with h = state entering the chunk, dh = gradient of the state leaving it, b the in-chunk cumulative
log decay and R_ij = e^{b_i - b_j} on the causal triangle (notes/chunked-algorithms.md §1), the gradient of o_i
enters every product as s_i do_i with a per-token factor s_i (scale, or 1 / (denominator_i + eps) normalized):
    dS    = (R ⊙ s do Vᵀ) (+ dd 1ᵀ normalized)            (score gradient, [BT, BT])
    dQ = e^b s dO hᵀ (+ e^b dd zᵀ) + dS K,    dK = e^{b_C - b} (V dhᵀ + 1 dzᵀ) + dSᵀ Q
    dV = (R ⊙ Q Kᵀ)ᵀ (s dO) + e^{b_C - b} K dh
    dh_prev = e^{b_C} dh + (e^b Q)ᵀ (s dO),   dz_prev = e^{b_C} dz + (e^b Q)ᵀ dd       (the reverse serial pass)
Normalized, the output is a numerator over a denominator and dd_i = -s_i (do_i · o_i) is the gradient of the
denominator: the op is the unnormalized one on [V, 1] with scale 1, and each score gradient s_i do_i·v_j + dd_i
is formed in fp32 from the raw 16-bit do and v and the fp32 o (see ``triton_fwd``), never from rounded parts.
The decay gradient is taken per chunk, as in fla's chunk_simple_gla: dL/db_t = q_t·dq_t − k_t·dk_t, and the
chunk's last token also gains dL/db_C through the state it hands on, <dh, S_end> = e^{b_C} (<h, dh> + z·dz)
+ Σ_j k_j·dk_j^inter; dg is the reverse cumulative sum of dL/db inside the chunk. Summing globally instead
(adding <S_T, dS_T> at the end of the sequence) cancels terms of size |S_T|·|dS_T| that were rounded differently:
with no initial state, dg at the first token is 0 exactly but came out ~0.3 at T = 1 with K = 256. Here
−k_j·dk_j^inter (inside each token's −k_j·dk_j) and the +Σ_j at the chunk's end come from the same fp32 tile of
one chunk, so what cancels is of one chunk's size, never of the whole sequence's.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common.chunk_tables import CHUNK_SIZE, chunk_rows, sequence_rows
from ..common.dot import dot
from ..common.triton_utils import autotune, state_tile, tile
from .triton_fwd import _CONFIGS, KEY_TILE, STATE_TILE, VALUE_TILE, dot_args, load_state_z, state_dtype, store_state_z


@triton.jit(do_not_specialize=["TOTAL"])
def dla_bwd_kernel_normalizer(do, o32, rden, dd, TOTAL, H: tl.constexpr, V: tl.constexpr, BT: tl.constexpr,
                              BV: tl.constexpr):
    """dd = -(do · o) / (denominator + eps) per token and head, fp32."""
    i_b, i_h = tl.program_id(0), tl.program_id(1)
    r_t = tl.cast(i_b, tl.int64) * BT + tl.arange(0, BT)
    m_t = r_t < TOTAL
    b_dot = tl.zeros([BT], dtype=tl.float32)
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        p = (r_t[:, None] * H + i_h) * V + o_v[None, :]
        m = m_t[:, None] & (o_v < V)[None, :]
        b_dot += tl.sum(tl.load(do + p, mask=m, other=0.).to(tl.float32) * tl.load(o32 + p, mask=m, other=0.), 1)
    b_rden = tl.load(rden + r_t * H + i_h, mask=m_t, other=0.)
    tl.store(dd + r_t * H + i_h, -b_dot * b_rden, mask=m_t)


@triton.jit
def _output_scale(rden, scale, r_t, m_t, i_h, H: tl.constexpr, NORMALIZE: tl.constexpr):
    """The per-token factor s of the output's gradient on the chunk's rows, 0 past the sequence end:
    1 / (denominator + eps) normalized, else scale."""
    if NORMALIZE:
        b_s = tl.load(rden + r_t * H + i_h, mask=m_t, other=0.)
    else:
        b_s = tl.where(m_t, scale, 0.)
    return b_s


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G", "NORMALIZE"])
@triton.jit
def dla_bwd_kernel_dh(q, do, gc, rden, dd, dh, dz, dht, dzt, dh0, dz0, cu_seqlens, chunk_offsets, scale,
                      H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                      BV: tl.constexpr, USE_G: tl.constexpr, USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr,
                      NORMALIZE: tl.constexpr, OP: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    i_nh, i_k, i_v = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_nh, i_h, bos, eos, boh, NT = sequence_rows(cu_seqlens, chunk_offsets, i_nh, H, BT)
    o_t = tl.arange(0, BT)
    o_k, o_v, m_k, m_v, m_kv, o_kv = state_tile(i_k, i_v, K, V, BK, BV)
    m_z = o_k < tl.where(i_v == 0, K, 0)
    b_dh, b_dz = load_state_z(dht, dzt, i_nh, o_k, m_k, o_kv, m_kv, K, V, BK, BV, USE_DHT, NORMALIZE)
    for i_r in range(0, NT):
        i_t = NT - 1 - tl.cast(i_r, tl.int64)
        store_state_z(dh, dz, (boh + i_t) * H + i_h, b_dh, b_dz, o_k, m_z, o_kv, m_kv, K, V, NORMALIZE)
        r_t = bos + i_t * BT + o_t
        m_t = r_t < eos
        b_qt = tl.load(q + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        b_do = tl.load(do + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0.)
        b_s = _output_scale(rden, scale, r_t, m_t, i_h, H, NORMALIZE)
        if USE_G:
            b_last = tl.load(gc + (tl.minimum(bos + i_t * BT + BT, eos) - 1) * H + i_h)
            b_e = tl.where(m_t, tl.exp(tl.load(gc + r_t * H + i_h, mask=m_t, other=0.)), 0.)
            b_dh *= tl.exp(b_last)
            b_dz *= tl.exp(b_last)
        else:
            b_e = tl.where(m_t, 1., 0.)
        b_qt = b_qt.to(tl.float32)
        b_dh += dot(b_qt * (b_e * b_s)[None, :], b_do, OP, PRECISION, WIDEN)
        if NORMALIZE:
            b_dz += tl.sum(b_qt * (b_e * tl.load(dd + r_t * H + i_h, mask=m_t, other=0.))[None, :], 1)
    if STORE_DH0:
        store_state_z(dh0, dz0, i_nh, b_dh, b_dz, o_k, m_z, o_kv, m_kv, K, V, NORMALIZE)


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G", "NORMALIZE"])
@triton.jit
def dla_bwd_kernel_dv(q, k, do, gc, rden, dh, dv, cu_seqlens, chunk_indices, scale,
                      H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                      BV: tl.constexpr, USE_G: tl.constexpr, NORMALIZE: tl.constexpr, OP: tl.constexpr,
                      PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    IN = q.dtype.element_ty
    i_c, i_v, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_c, i_t, bos, eos, o_i, r_t, m_t = chunk_rows(chunk_indices, cu_seqlens, i_c, BT)
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    p_dh = dh + (i_c * H + i_h) * K * V

    b_dv = tl.zeros([BT, BV], dtype=tl.float32)
    b_At = tl.zeros([BT, BT], dtype=tl.float32)  # At[j, i] = k_j · q_i
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :], other=0.)
        b_qt = tl.load(q + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :], other=0.)
        b_dh = tl.load(p_dh + o_k[:, None] * V + o_v[None, :], mask=m_k[:, None] & m_v[None, :], other=0.)
        b_At += dot(b_k, b_qt, IN, PRECISION, WIDEN)
        b_dv += dot(b_k, b_dh, dh.dtype.element_ty, PRECISION, WIDEN)

    m_A = (o_i[:, None] <= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    b_s = _output_scale(rden, scale, r_t, m_t, i_h, H, NORMALIZE)
    if USE_G:
        b_last = tl.load(gc + (tl.minimum(bos + i_t * BT + BT, eos) - 1) * H + i_h)
        b_g = tl.load(gc + r_t * H + i_h, mask=m_t, other=0.)
        b_dv *= tl.where(m_t, tl.exp(b_last - b_g), 0.)[:, None]
        b_At = tl.where(m_A, b_At * tl.exp(tl.where(m_A, b_g[None, :] - b_g[:, None], 0.)), 0.)
    else:
        b_At = tl.where(m_A, b_At, 0.)
    b_do = tl.load(do + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_t[:, None] & m_v[None, :], other=0.)
    b_dv += dot(b_At * b_s[None, :], b_do, OP, PRECISION, WIDEN)
    tl.store(dv + (r_t[:, None] * H + i_h) * V + o_v[None, :], b_dv.to(dv.dtype.element_ty),
             mask=m_t[:, None] & m_v[None, :])


@autotune(configs=_CONFIGS, key=["H", "K", "V", "BK", "BV", "USE_G", "NORMALIZE"])
@triton.jit
def dla_bwd_kernel_dqkg(q, k, v, do, gc, h, dh, z, dz, rden, dd, dq, dk, dg, cu_seqlens, chunk_indices, scale,
                        H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr,
                        BV: tl.constexpr, USE_G: tl.constexpr, NORMALIZE: tl.constexpr, OP: tl.constexpr,
                        PRECISION: tl.constexpr, WIDEN: tl.constexpr):
    """dq, dk and dg of one chunk and head. All of K is one program's loop, so the score gradient (a product over
    V) is formed once per chunk rather than once per K tile, and the decay gradient's sum over K and its reverse
    cumulative sum over the chunk happen here rather than in a kernel of their own."""
    IN = q.dtype.element_ty
    SDT = h.dtype.element_ty
    i_c, i_h = tl.program_id(0), tl.program_id(1)
    i_c, i_t, bos, eos, o_i, r_t, m_t = chunk_rows(chunk_indices, cu_seqlens, i_c, BT)
    o_state = (i_c * H + i_h) * K * V

    b_ds = tl.zeros([BT, BT], dtype=tl.float32)  # ds[i, j] = do_i · v_j
    b_dst = tl.zeros([BT, BT], dtype=tl.float32)  # dsᵀ, its own product: see the note at dk_intra
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        m_tv = m_t[:, None] & (o_v < V)[None, :]
        b_v = tl.load(v + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_tv, other=0.)
        b_do = tl.load(do + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_tv, other=0.)
        b_ds += dot(b_do, tl.trans(b_v), IN, PRECISION, WIDEN)
        b_dst += dot(b_v, tl.trans(b_do), IN, PRECISION, WIDEN)

    m_A = (o_i[:, None] >= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    m_At = (o_i[:, None] <= o_i[None, :]) & m_t[:, None] & m_t[None, :]
    b_s = _output_scale(rden, scale, r_t, m_t, i_h, H, NORMALIZE)
    b_ds *= b_s[:, None]
    b_dst *= b_s[None, :]
    if NORMALIZE:
        b_dd = tl.load(dd + r_t * H + i_h, mask=m_t, other=0.)
        b_ds += b_dd[:, None]
        b_dst += b_dd[None, :]
    if USE_G:
        i_last = bos + tl.minimum(i_t * BT + BT, eos - bos) - 1
        b_g_last = tl.load(gc + i_last * H + i_h)
        b_g = tl.load(gc + r_t * H + i_h, mask=m_t, other=0.)
        b_ds = tl.where(m_A, b_ds * tl.exp(tl.where(m_A, b_g[:, None] - b_g[None, :], 0.)), 0.)
        b_dst = tl.where(m_At, b_dst * tl.exp(tl.where(m_At, b_g[None, :] - b_g[:, None], 0.)), 0.)
    else:
        b_ds = tl.where(m_A, b_ds, 0.)
        b_dst = tl.where(m_At, b_dst, 0.)

    # in the K loop's operand dtype once, rather than cast by the dot helper in every K iteration
    b_ds = b_ds.to(OP)
    b_dst = b_dst.to(OP)

    b_db = tl.zeros([BT], dtype=tl.float32)  # dL/db per token, summed over K
    b_db_end = 0.  # what the chunk's last token gains through the state it hands on
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        m_tk = m_t[:, None] & m_k[None, :]
        b_dq = tl.zeros([BT, BK], dtype=tl.float32)  # dO hᵀ
        b_dk = tl.zeros([BT, BK], dtype=tl.float32)  # V dhᵀ
        b_hdh = tl.zeros([BK], dtype=tl.float32)  # Σ_v h ⊙ dh, for <h, dh>
        for i_v in range(0, tl.cdiv(V, BV)):
            o_v = i_v * BV + tl.arange(0, BV)
            m_v = o_v < V
            m_tv = m_t[:, None] & m_v[None, :]
            b_v = tl.load(v + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_tv, other=0.)
            b_do = tl.load(do + (r_t[:, None] * H + i_h) * V + o_v[None, :], mask=m_tv, other=0.)
            # states loaded transposed, [BV, BK]
            o_vk = o_v[:, None] + o_k[None, :] * V
            m_vk = m_v[:, None] & m_k[None, :]
            b_h_vk = tl.load(h + o_state + o_vk, mask=m_vk, other=0.)
            b_dh_vk = tl.load(dh + o_state + o_vk, mask=m_vk, other=0.)
            b_dq += dot(b_do, b_h_vk, SDT, PRECISION, WIDEN)
            b_dk += dot(b_v, b_dh_vk, SDT, PRECISION, WIDEN)
            if USE_G:
                b_hdh += tl.sum(b_h_vk.to(tl.float32) * b_dh_vk.to(tl.float32), axis=0)

        b_q = tl.load(q + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_tk, other=0.)
        b_k = tl.load(k + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_tk, other=0.)
        b_dq *= b_s[:, None]
        if NORMALIZE:
            b_zc = tl.load(z + (i_c * H + i_h) * K + o_k, mask=m_k, other=0.)
            b_dzc = tl.load(dz + (i_c * H + i_h) * K + o_k, mask=m_k, other=0.)
            b_dq += b_dd[:, None] * b_zc[None, :]
            b_dk += b_dzc[None, :]
            b_hdh += b_zc * b_dzc
        if USE_G:
            b_dq *= tl.where(m_t, tl.exp(b_g), 0.)[:, None]
            b_dk *= tl.where(m_t, tl.exp(b_g_last - b_g), 0.)[:, None]
        b_dq += dot(b_ds, b_k, OP, PRECISION, WIDEN)
        if USE_G:
            b_kdk_inter = tl.sum(b_k.to(tl.float32) * b_dk, axis=1)
        # dsᵀ is a product of its own rather than tl.trans(ds): Triton 3.4-3.7.0 miscompiles on Hopper the
        # transpose of a dot output used as a 16-bit dot operand (fla issue #640).
        b_dk += dot(b_dst, b_q, OP, PRECISION, WIDEN)
        p_out = (r_t[:, None] * H + i_h) * K + o_k[None, :]
        tl.store(dq + p_out, b_dq.to(dq.dtype.element_ty), mask=m_tk)
        tl.store(dk + p_out, b_dk.to(dk.dtype.element_ty), mask=m_tk)
        if USE_G:
            b_db += tl.sum(b_q.to(tl.float32) * b_dq - b_k.to(tl.float32) * b_dk, axis=1)
            b_db_end += tl.exp(b_g_last) * tl.sum(b_hdh, axis=0) + tl.sum(b_kdk_inter, axis=0)
    if USE_G:
        b_db = tl.where(r_t == i_last, b_db + b_db_end, b_db)
        tl.store(dg + r_t * H + i_h, tl.cumsum(b_db, axis=0, reverse=True), mask=m_t)


def normalizer_grad(do, o32, rden):
    """dd [1, T, H] fp32: the gradient of each token's denominator."""
    _, TOTAL, H, V = do.shape
    dd = torch.empty(rden.shape, dtype=torch.float32, device=do.device)
    dla_bwd_kernel_normalizer[(triton.cdiv(TOTAL, CHUNK_SIZE), H)](do, o32, rden, dd, TOTAL, H=H, V=V, BT=CHUNK_SIZE,
                                                                   BV=tile(V, 128))
    return dd


def chunk_bwd_dh(q, do, gc, rden, dd, dht, dzt, want_dh0, scale, normalize, tables):
    """dh [NT, H, K, V] (``state_dtype``) and, normalized, dz [NT, H, K] fp32: gradients of the state leaving each
    chunk; dS_0 [N, H, K, V] and dz_0 [N, H, K] fp32 (or None)."""
    _, _, H, K = q.shape
    V = do.shape[-1]
    BK, BV = tile(K, STATE_TILE), tile(V, STATE_TILE)
    NT, N = tables.num_chunks, tables.num_seqs
    dh = torch.empty(NT, H, K, V, dtype=state_dtype(q.dtype), device=q.device)
    dz = torch.empty(NT, H, K, dtype=torch.float32, device=q.device) if normalize else None
    dh0 = torch.empty(N, H, K, V, dtype=torch.float32, device=q.device) if want_dh0 else None
    dz0 = torch.empty(N, H, K, dtype=torch.float32, device=q.device) if want_dh0 and normalize else None
    dla_bwd_kernel_dh[(N * H, triton.cdiv(K, BK), triton.cdiv(V, BV))](
        q, do, gc, rden, dd, dh, dz, dht, dzt, dh0, dz0, tables.cu_seqlens, tables.chunk_offsets, scale,
        H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=gc is not None, USE_DHT=dht is not None,
        STORE_DH0=want_dh0, NORMALIZE=normalize, **dot_args(q.dtype, K))
    return dh, dz, dh0, dz0


def chunk_bwd_dv(q, k, do, gc, rden, dh, scale, tables):
    _, _, H, K = q.shape
    V = do.shape[-1]
    BK, BV = tile(K, 64), tile(V, VALUE_TILE)
    dv = torch.empty_like(do)
    dla_bwd_kernel_dv[(tables.num_chunks, triton.cdiv(V, BV), H)](
        q, k, do, gc, rden, dh, dv, tables.cu_seqlens, tables.chunk_indices, scale,
        H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV, USE_G=gc is not None, NORMALIZE=rden is not None,
        **dot_args(q.dtype, K))
    return dv


def chunk_bwd_dqkg(q, k, v, do, gc, h, dh, z, dz, rden, dd, scale, tables):
    """dq, dk [1, T, H, K] and dg [1, T, H] fp32 (None without decay)."""
    _, TOTAL, H, K = q.shape
    V = v.shape[-1]
    dq, dk = torch.empty_like(q), torch.empty_like(k)
    dg = torch.empty(1, TOTAL, H, dtype=torch.float32, device=q.device) if gc is not None else None
    dla_bwd_kernel_dqkg[(tables.num_chunks, H)](
        q, k, v, do, gc, h, dh, z, dz, rden, dd, dq, dk, dg, tables.cu_seqlens, tables.chunk_indices, scale,
        H=H, K=K, V=V, BT=CHUNK_SIZE, BK=tile(K, KEY_TILE), BV=tile(V, 64), USE_G=gc is not None,
        NORMALIZE=rden is not None, **dot_args(q.dtype, K))
    return dq, dk, dg
