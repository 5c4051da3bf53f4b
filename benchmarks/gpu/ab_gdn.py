"""A/B of the gated delta rule forward in one process, at kernels.py's four forward shapes (bf16, H 16, K = V = 128):
the training forward (kkt_inverse, wu, state, output) against the inference forward (kkt_inverse,
wu with Q K^T, fused state_output), both through the public op. Each variant is first
checked against the fp32 reference (kernels.py's check), then timed: wall (do_bench median), host per call,
kernel sum (torch.profiler) and the call replayed from a CUDA graph; fla's forward beside them.

    cd benchmarks/gpu && python3 ab_gdn.py
"""
from __future__ import annotations

import sys

import kernel_profile as kp
import torch

import kernels as bench
from relin.kernels import chunk_gated_delta_rule
from relin.kernels.gated_delta_rule import chunk as gdn_chunk
from relin.kernels.gated_delta_rule import triton_fwd as fwd

FWD = [(1, 4096, 16, 128), (1, 16384, 16, 128), (1, 65536, 16, 128), (8, 4096, 16, 128)]
CHECKS = [(1, 256, 4, 128), (2, 200, 3, 128), (1, 130, 2, 100)]


TRAINING = fwd.chunk_gdn_fwd
VARIANTS = {
    "training forward (4 kernels)": (TRAINING, lambda *a: TRAINING(*a)[:2]),
    "inference forward (3 kernels)": (TRAINING, fwd.chunk_gdn_fwd_inference),
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
        kp.python_profile(bench.op_factory(chunk_gated_delta_rule, bench.gdn_inputs(*FWD[0]), False, **bench.TRITON)(),
                          rows=18)
        kp.print_tuning(kp.autotuners())
    print("\nchecks:", ", ".join(f"{name} {'ok' if ok else 'FAILED'}" for name, ok in checks.items()))
    print(f"{'case':48s} {'wall':>7s} {'host':>7s} {'kernels':>8s} {'graphed':>8s}")
    for label, wall, host, kernel_sum, graph in rows:
        print(f"{label:48s} {wall:7.3f} {host:7.3f} {kernel_sum:8.3f} {graph:8.3f}")


if __name__ == "__main__":
    main()
