"""A/B of the gated delta rule's two bandwidth-bound forward passes, output and W/U, at kernels.py's four forward
shapes (bf16, H 16, K = V = 128): the kernels of ``triton_fwd`` against variants, each config swept by hand and
timed alone (do_bench median) on the intermediates of one real forward, after checking it against the shipped
kernel's result.

Variants of the output pass O = scale (diag(gamma) Q S + tril(R * Q K^T) delta):
- ``shipped``: ``triton_fwd``'s kernel, autotuned (when this A/B chose it, that kernel loaded all of K at once;
  it now runs the K-sliced layout below, which won: benchmarks/results/2026-12-03-h200-95b12d5/ab-output.log);
- ``kloop``: fla's layout, a loop over BK-wide K slices accumulating Q S and Q K^T (the pipeliner overlaps the
  next slice's loads with this slice's products);
- ``kloop_tma`` / ``oneshot_tma``: the same with q, k, h, delta read through host-built TMA tensor descriptors
  ([T, H, K] views, rows past a sequence's end zeroed after the load) and o stored through one for full chunks.
Variants of W = M^{-1} diag(beta gamma) K, U = M^{-1} diag(beta) V: ``shipped`` and ``wu_tma`` (descriptor loads
and stores).

    cd benchmarks/gpu && python3 ab_gdn_output.py
"""
from __future__ import annotations

import itertools

import torch
import triton
import triton.language as tl
from triton.testing import do_bench
from triton.tools.tensor_descriptor import TensorDescriptor

import kernels as bench  # (benchmarks/gpu/kernels.py: inputs)
import relin.kernels.gated_delta_rule.triton_fwd as fwd
from relin.kernels.common.chunk_tables import CHUNK_SIZE, chunk_tables, locate_chunk
from relin.kernels.common.dot import dot, dot_mode

SHAPES = [(1, 4096, 16, 128), (1, 16384, 16, 128), (1, 65536, 16, 128), (8, 4096, 16, 128)]
VARLEN = [0, 100, 300, 333, 1024]


@triton.jit(do_not_specialize=["T"])
def output_variant(
    q, k, v_new, h, b_cum, o, q_desc, k_desc, d_desc, h_desc, o_desc, cu_seqlens, chunk_indices, scale, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    TMA: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = h.dtype.element_ty
    i_v, i_tg, i_h = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    i_tg = tl.cast(i_tg, tl.int64)
    i_c, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_tg)
    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    m_t = r_t < eos
    o_v = i_v * BV + tl.arange(0, BV)
    m_v = o_v < V
    row0 = tl.cast(bos + i_c * BT, tl.int32)
    b_o = tl.zeros([BT, BV], dtype=tl.float32)
    b_A = tl.zeros([BT, BT], dtype=tl.float32)
    for i_k in range(0, tl.cdiv(K, BK)):
        o_k = i_k * BK + tl.arange(0, BK)
        m_k = o_k < K
        if TMA:
            b_q = tl.reshape(q_desc.load([row0, i_h, i_k * BK]), [BT, BK])
            b_k = tl.reshape(k_desc.load([row0, i_h, i_k * BK]), [BT, BK])
            b_S = tl.reshape(h_desc.load([tl.cast(i_tg * H + i_h, tl.int32), i_k * BK, i_v * BV]), [BK, BV])
            b_q = tl.where(m_t[:, None], b_q, 0.)
            b_kt = tl.trans(tl.where(m_t[:, None], b_k, 0.))
        else:
            b_q = tl.load(q + (r_t[:, None] * H + i_h) * K + o_k[None, :], mask=m_t[:, None] & m_k[None, :],
                          other=0.)
            b_kt = tl.load(k + (r_t[None, :] * H + i_h) * K + o_k[:, None], mask=m_k[:, None] & m_t[None, :],
                           other=0.)
            b_S = tl.load(h + (i_tg * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :],
                          mask=m_k[:, None] & m_v[None, :], other=0.)
        b_o += dot(b_q, b_S, DT, PRECISION, WIDEN)
        b_A += dot(b_q, b_kt, DT, PRECISION, WIDEN)
    p_v = (r_t[:, None] * H + i_h) * V + o_v[None, :]
    m_tv = m_t[:, None] & m_v[None, :]
    if TMA:
        b_d = tl.where(m_t[:, None], tl.reshape(d_desc.load([row0, i_h, i_v * BV]), [BT, BV]), 0.)
    else:
        b_d = tl.load(v_new + p_v, mask=m_tv, other=0.)
    b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
    m_lower = (o_t[:, None] >= o_t[None, :]) & m_t[:, None] & m_t[None, :]
    b_A = tl.where(m_lower, b_A * tl.exp(tl.where(m_lower, b_b[:, None] - b_b[None, :], 0.)), 0.)
    b_o = b_o * tl.exp(b_b)[:, None] + dot(b_A, b_d, DT, PRECISION, WIDEN)
    b_o = (scale * b_o).to(o.dtype.element_ty)
    if TMA:
        if bos + i_c * BT + BT <= eos:
            o_desc.store([row0, i_h, i_v * BV], tl.reshape(b_o, [BT, 1, BV]))
        else:
            tl.store(o + p_v, b_o, mask=m_tv)
    else:
        tl.store(o + p_v, b_o, mask=m_tv)


@triton.jit(do_not_specialize=["T"])
def wu_tma(
    k, v, beta, b_cum, m_inv, w, u, k_desc, v_desc, w_desc, u_desc, cu_seqlens, chunk_indices, T,
    H: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BT: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, WIDEN: tl.constexpr,
):
    DT = w.dtype.element_ty
    i_tg, i_h = tl.program_id(0), tl.program_id(1)
    i_tg = tl.cast(i_tg, tl.int64)
    i_c, bos, eos = locate_chunk(chunk_indices, cu_seqlens, i_tg)
    o_t = tl.arange(0, BT)
    r_t = bos + i_c * BT + o_t
    m_t = r_t < eos
    full = bos + i_c * BT + BT <= eos
    row0 = tl.cast(bos + i_c * BT, tl.int32)
    b_M = tl.load(m_inv + (i_tg * H + i_h) * BT * BT + o_t[:, None] * BT + o_t[None, :])
    b_beta = tl.load(beta + r_t * H + i_h, mask=m_t, other=0.).to(tl.float32)
    b_b = tl.load(b_cum + r_t * H + i_h, mask=m_t, other=0.)
    b_k = tl.where(m_t[:, None], tl.reshape(k_desc.load([row0, i_h, 0]), [BT, BK]).to(tl.float32), 0.)
    b_w = dot(b_M, b_k * (b_beta * tl.exp(b_b))[:, None], DT, PRECISION, WIDEN).to(DT)
    o_k = tl.arange(0, BK)
    if full:
        w_desc.store([row0, i_h, 0], tl.reshape(b_w, [BT, 1, BK]))
    else:
        tl.store(w + (r_t[:, None] * H + i_h) * K + o_k[None, :], b_w, mask=m_t[:, None] & (o_k < K)[None, :])
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)
        b_v = tl.where(m_t[:, None], tl.reshape(v_desc.load([row0, i_h, i_v * BV]), [BT, BV]).to(tl.float32), 0.)
        b_u = dot(b_M, b_v * b_beta[:, None], DT, PRECISION, WIDEN).to(DT)
        if full:
            u_desc.store([row0, i_h, i_v * BV], tl.reshape(b_u, [BT, 1, BV]))
        else:
            tl.store(u + (r_t[:, None] * H + i_h) * V + o_v[None, :], b_u,
                     mask=m_t[:, None] & (o_v < V)[None, :])


def desc3(x, rows, inner):
    """x [.., A, B, C] as a 3-D descriptor over its last three dims with block [rows, 1, inner]."""
    y = x.reshape(x.shape[-3], x.shape[-2], x.shape[-1]) if x.dim() == 4 and x.shape[0] == 1 else x
    return TensorDescriptor(y, list(y.shape), list(y.stride()), [rows, 1, inner])


def intermediates(B, T, H, D, bounds=None):
    x = bench.gdn_inputs(B, T, H, D) if bounds is None else bench.gdn_inputs(1, bounds[-1], H, D)
    q, k, v, g, beta = (x[n].reshape(1, -1, *x[n].shape[2:]) for n in ("q", "k", "v", "g", "beta"))
    tables = chunk_tables(B, T, None, q.device) if bounds is None else chunk_tables(1, bounds[-1], bounds, q.device)
    o, _, (b_cum, m_inv, w, h, v_new) = fwd.chunk_gdn_fwd(q, k, v, g, beta, D ** -0.5, None, tables, False)
    return dict(q=q, k=k, v=v, beta=beta, o=o, b_cum=b_cum, m_inv=m_inv, w=w, h=h, v_new=v_new, tables=tables)


def output_launcher(x, TMA, BK, BV, warps, stages):
    q, k, h, v_new, b_cum = x["q"], x["k"], x["h"], x["v_new"], x["b_cum"]
    cu, ci, _, NT, _ = x["tables"]
    _, T, H, K = q.shape
    V = v_new.shape[-1]
    out = torch.empty_like(v_new)
    precision, widen = dot_mode(q.dtype)
    hs = h.reshape(NT * H, K, V)
    descs = ((desc3(q, 64, BK), desc3(k, 64, BK), desc3(v_new, 64, BV),
              TensorDescriptor(hs, list(hs.shape), list(hs.stride()), [1, BK, BV]), desc3(out, 64, BV))
             if TMA else (q, k, v_new, h, out))

    def launch():
        output_variant[(triton.cdiv(V, BV), NT, H)](
            q, k, v_new, h, b_cum, out, *descs, cu, ci, K ** -0.5, T, H=H, K=K, V=V, BT=CHUNK_SIZE, BK=BK, BV=BV,
            TMA=TMA, PRECISION=precision, WIDEN=widen, num_warps=warps, num_stages=stages)
        return out
    return launch


def shipped_output(x):
    q, k, h, v_new, b_cum = x["q"], x["k"], x["h"], x["v_new"], x["b_cum"]
    cu, ci, _, NT, _ = x["tables"]
    _, T, H, K = q.shape
    V = v_new.shape[-1]
    out = torch.empty_like(v_new)
    precision, widen = dot_mode(q.dtype)

    def launch():
        fwd.gdn_fwd_kernel_output[lambda meta: (triton.cdiv(V, meta["BV"]), NT, H)](
            q, k, v_new, h, b_cum, out, cu, ci, K ** -0.5, T, WIDTH=fwd.parallel_width(NT, H, 1 << 16),
            H=H, K=K, V=V, BT=CHUNK_SIZE, PRECISION=precision, WIDEN=widen)
        return out
    return launch


def wu_launchers(x, BV, warps, stages):
    k, v, beta, b_cum, m_inv = x["k"], x["v"], x["beta"], x["b_cum"], x["m_inv"]
    cu, ci, _, NT, _ = x["tables"]
    _, T, H, K = k.shape
    V = v.shape[-1]
    w, u = torch.empty_like(k), torch.empty_like(v)
    precision, widen = dot_mode(k.dtype)
    descs = (desc3(k, 64, K), desc3(v, 64, BV), desc3(w, 64, K), desc3(u, 64, BV))

    def launch():
        wu_tma[(NT, H)](k, v, beta, b_cum, m_inv, w, u, *descs, cu, ci, T, H=H, K=K, V=V, BT=CHUNK_SIZE, BK=K,
                        BV=BV, PRECISION=precision, WIDEN=widen, num_warps=warps, num_stages=stages)
        return w, u
    return launch


def shipped_wu(x):
    k, v, beta, b_cum, m_inv = x["k"], x["v"], x["beta"], x["b_cum"], x["m_inv"]
    cu, ci, _, NT, _ = x["tables"]
    _, T, H, K = k.shape
    V = v.shape[-1]
    w, u = torch.empty_like(k), torch.empty_like(v)
    precision, widen = dot_mode(k.dtype)

    def launch():
        fwd.gdn_fwd_kernel_wu[(NT, H)](k, v, beta, b_cum, m_inv, w, u, cu, ci, T, H=H, K=K, V=V, BT=CHUNK_SIZE,
                                       BK=K, PRECISION=precision, WIDEN=widen)
        return w, u
    return launch


def rel(a, b):
    a, b = a.float(), b.float()
    return ((a - b).pow(2).mean().sqrt() / b.pow(2).mean().sqrt().clamp_min(1e-12)).item()


OUTPUT_CONFIGS = [(tma, bk, bv, wp, st) for tma, bk, bv, wp, st in itertools.product(
    (False, True), (64, 128), (64, 128), (4, 8), (2, 3)) if not (bk == 128 and st == 3)]
WU_CONFIGS = list(itertools.product((64, 128), (4, 8), (2, 3)))


def bench_ms(fn):
    return do_bench(fn, warmup=10, rep=60, return_mode="median")


def main():
    fwd.tensor_descriptors(torch.device("cuda"))  # sets Triton's allocator
    torch.manual_seed(0)
    # Correctness at a varlen shape with partial chunks first (rows past each sequence's end).
    x = intermediates(1, VARLEN[-1], 4, 128, bounds=VARLEN)
    ref_o, (ref_w, ref_u) = shipped_output(x)().clone(), [t.clone() for t in shipped_wu(x)()]
    bad = []
    for cfg in OUTPUT_CONFIGS:
        e = rel(output_launcher(x, *cfg)(), ref_o)
        if not e < 1e-2:
            bad.append(("output", cfg, e))
    for cfg in WU_CONFIGS:
        w, u = wu_launchers(x, *cfg)()
        e = max(rel(w, ref_w), rel(u, ref_u))
        if not e < 1e-2:
            bad.append(("wu", cfg, e))
    print("varlen check:", "ok" if not bad else bad, flush=True)

    summary = []
    for shape in SHAPES:
        x = intermediates(*shape)
        ref_o = shipped_output(x)().clone()
        ref_w, ref_u = (t.clone() for t in shipped_wu(x)())
        base_o, base_wu = bench_ms(shipped_output(x)), bench_ms(shipped_wu(x))
        rows = []
        for cfg in OUTPUT_CONFIGS:
            launch = output_launcher(x, *cfg)
            e = rel(launch(), ref_o)
            rows.append((bench_ms(launch), cfg, e))
        rows.sort()
        wu_rows = []
        for cfg in WU_CONFIGS:
            launch = wu_launchers(x, *cfg)
            w, u = launch()
            e = max(rel(w, ref_w), rel(u, ref_u))
            wu_rows.append((bench_ms(launch), cfg, e))
        wu_rows.sort()
        print(f"\n{shape}: shipped output {base_o:.4f} ms, shipped wu {base_wu:.4f} ms", flush=True)
        for ms, cfg, e in rows[:6]:
            print(f"  output {ms:.4f} (TMA, BK, BV, warps, stages)={cfg} rel {e:.1e}")
        for tma in (False, True):
            best = min(r for r in rows if r[1][0] == tma)
            print(f"  best output TMA={tma}: {best[0]:.4f} {best[1]}")
        for ms, cfg, e in wu_rows[:3]:
            print(f"  wu_tma {ms:.4f} (BV, warps, stages)={cfg} rel {e:.1e}")
        summary.append((shape, base_o, rows[0], base_wu, wu_rows[0]))
        del x
        torch.cuda.empty_cache()

    print(f"\n{'shape':22s} {'out ship':>9s} {'out best':>9s} {'cfg':28s} {'wu ship':>8s} {'wu tma':>8s} cfg")
    for shape, bo, (ms, cfg, _), bw, (wms, wcfg, _) in summary:
        print(f"{str(shape):22s} {bo:9.4f} {ms:9.4f} {str(cfg):28s} {bw:8.4f} {wms:8.4f} {wcfg}")


if __name__ == "__main__":
    main()
