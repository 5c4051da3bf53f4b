"""A/B of the gated delta rule forward in one process, at kernels.py's four forward shapes (bf16, H 16, K = V = 128)
and its fwd+bwd shape: the four-kernel forward before (kkt_inverse, wu, state, output), the training forward after
(prepare, state, output) and the inference forward (prepare with Q K^T, fused state_output). Each variant is first
checked against the fp32 reference (kernels.py's check), then timed: wall (do_bench median), host per call,
kernel sum (torch.profiler) and the call replayed from a CUDA graph; fla's forward beside them.

    cd benchmarks/gpu && python3 ab_gdn.py
"""
from __future__ import annotations

import sys

import kernel_profile as kp
import torch
import triton

import kernels as bench
from relin.kernels import chunk_gated_delta_rule
from relin.kernels.common.chunk_tables import CHUNK_SIZE
from relin.kernels.common.dot import dot_mode
from relin.kernels.common.triton_utils import tile
from relin.kernels.gated_delta_rule import chunk as gdn_chunk
from relin.kernels.gated_delta_rule import triton_fwd as fwd

FWD = [(1, 4096, 16, 128), (1, 16384, 16, 128), (1, 65536, 16, 128), (8, 4096, 16, 128)]
FWD_BWD = (1, 65536, 16, 128)
CHECKS = [(1, 256, 4, 128), (2, 200, 3, 128), (1, 130, 2, 100)]


def split_forward(q, k, v, g, beta, scale, h0, tables, store_final):
    """The forward before: kkt_inverse and wu as two kernels, then state and output."""
    _, T, H, K = k.shape
    V = v.shape[-1]
    BT, BK = CHUNK_SIZE, tile(K, 256)
    dtype = fwd.compute_dtype(v, k, q)
    precision, widen = dot_mode(dtype)
    cu_seqlens, chunk_indices, chunk_offsets, NT, N = tables
    b_cum = torch.empty(1, T, H, dtype=torch.float32, device=k.device)
    m_inv = torch.empty(NT, H, BT, BT, dtype=dtype, device=k.device)
    w = torch.empty(k.shape, dtype=dtype, device=k.device)
    u = torch.empty(v.shape, dtype=dtype, device=k.device)
    fwd.gdn_fwd_kernel_kkt_inverse[(NT, H)](
        k, g, beta, b_cum, m_inv, cu_seqlens, chunk_indices, T, H=H, K=K, BT=BT, PRECISION=precision, WIDEN=widen)
    fwd.gdn_fwd_kernel_wu[(NT, H)](
        k, v, beta, b_cum, m_inv, w, u, cu_seqlens, chunk_indices, T,
        H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
    h = torch.empty(NT, H, K, V, dtype=dtype, device=k.device)
    v_new = torch.empty(v.shape, dtype=dtype, device=k.device)
    ht = torch.empty(N, H, K, V, dtype=torch.float32, device=k.device) if store_final else None
    fwd.gdn_fwd_kernel_state[lambda meta: (triton.cdiv(V, meta["BV"]), N * H)](
        k, w, u, b_cum, h, v_new, h0, ht, cu_seqlens, chunk_offsets, T, fwd.parallel_width(N, H),
        H=H, K=K, V=V, BT=BT, BK=BK, USE_INITIAL_STATE=h0 is not None, STORE_FINAL_STATE=store_final,
        PRECISION=precision, WIDEN=widen)
    o = torch.empty_like(v)
    fwd.gdn_fwd_kernel_output[lambda meta: (triton.cdiv(V, meta["BV"]), NT, H)](
        q, k, v_new, h, b_cum, o, cu_seqlens, chunk_indices, scale, T,
        H=H, K=K, V=V, BT=BT, BK=BK, PRECISION=precision, WIDEN=widen)
    return o, ht, (b_cum, m_inv, w, h, v_new)


TRAINING_AFTER = fwd.chunk_gdn_fwd
INFERENCE_AFTER = fwd.chunk_gdn_fwd_inference
VARIANTS = {
    "before (4 kernels)": (split_forward, lambda *a: split_forward(*a)[:2]),
    "prepare+state+output": (TRAINING_AFTER, lambda *a: TRAINING_AFTER(*a)[:2]),
    "inference (2 kernels)": (TRAINING_AFTER, INFERENCE_AFTER),
}


def configure(variant):
    gdn_chunk.chunk_gdn_fwd, gdn_chunk.chunk_gdn_fwd_inference = VARIANTS[variant]


def measure(label, fn, rows):
    fn()
    torch.cuda.synchronize()
    wall = kp.do_bench(fn, warmup=10, rep=50, return_mode="median")
    host = kp.host_ms_per_call(fn)
    kernel_rows = kp.kernel_times(fn)
    graph = kp.graphed_ms(fn)
    print(f"{label}: wall {wall:.3f} host {host:.3f} graphed {graph:.3f} | "
          + ", ".join(f"{k[:28]} {ms:.3f}" for k, ms in kernel_rows), flush=True)
    rows.append((label, wall, host, sum(ms for _, ms in kernel_rows), graph))
    torch.cuda.empty_cache()


def main():
    only = sys.argv[1:]
    rows, checks = [], {}
    fla_op = bench.fla("gated_delta_rule", "chunk_gated_delta_rule")
    for shape in FWD:
        inputs = bench.gdn_inputs(*shape)
        try:
            measure(f"fla fwd {shape}", bench.op_factory(fla_op, inputs, False)(), rows)
        except Exception as error:  # noqa: BLE001
            print(f"fla fwd {shape}: {type(error).__name__}: {error}")
    for name in VARIANTS:
        if only and not any(o in name for o in only):
            continue
        configure(name)
        ok = True
        for shape in CHECKS:
            inputs = bench.gdn_inputs(*shape)
            with torch.no_grad():
                out = chunk_gated_delta_rule(**inputs, **bench.TRITON)[0]
            ref = bench.naive_recurrent_gated_delta_rule(**{n: x.float().cpu() for n, x in inputs.items()})[0]
            error = bench.relative_rms(ref, out)
            print(f"check {name} fwd {shape}: o {error:.2e}", flush=True)
            ok &= error < bench.TOLERANCE["o"]
            ok &= bench.check_op(f"{name} {shape} fwd+bwd", lambda **a: chunk_gated_delta_rule(**a, **bench.TRITON)[0],
                                 lambda **a: bench.naive_recurrent_gated_delta_rule(**a)[0], inputs)["passed"]
        checks[name] = ok
        for shape in FWD:
            measure(f"{name} fwd {shape}", bench.op_factory(chunk_gated_delta_rule, bench.gdn_inputs(*shape), False,
                                                           **bench.TRITON)(), rows)
        if name != "inference (2 kernels)":
            measure(f"{name} fwd+bwd {FWD_BWD}", bench.op_factory(
                chunk_gated_delta_rule, bench.gdn_inputs(*FWD_BWD), True, **bench.TRITON)(), rows)
        kp.print_tuning(kp.autotuners())
    print("\nchecks:", ", ".join(f"{name} {'ok' if ok else 'FAILED'}" for name, ok in checks.items()))
    print(f"{'case':48s} {'wall':>7s} {'host':>7s} {'kernels':>8s} {'graphed':>8s}")
    for label, wall, host, kernel_sum, graph in rows:
        print(f"{label:48s} {wall:7.3f} {host:7.3f} {kernel_sum:8.3f} {graph:8.3f}")


if __name__ == "__main__":
    main()
