"""The gated delta rule forward with and without autograd, at kernels.py's four forward shapes (bf16, H 16,
K = V = 128), fla's forward beside it: wall (do_bench median), host per call, kernel sum (torch.profiler)
and the call replayed from a CUDA graph. "autograd" times the forward of inputs that require gradients (the
autograd Function, which keeps the backward's intermediates); "no autograd" inputs that do not. A fwd+bwd check
against the fp32 reference runs first.

    cd benchmarks/gpu && python3 ab_gdn.py
"""
from __future__ import annotations

import kernel_bench as bench
import kernel_profile as kp
import torch

from relin.kernels import chunk_gated_delta_rule

FWD = [(1, 4096, 16, 128), (1, 16384, 16, 128), (1, 65536, 16, 128), (8, 4096, 16, 128)]


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
    return wall


def forward(inputs, requires_grad):
    leaves = {n: x.detach().clone().requires_grad_(requires_grad and x.is_floating_point()) for n, x in inputs.items()}
    return lambda: chunk_gated_delta_rule(**leaves, **bench.TRITON)[0]


def main():
    rows, ratios = [], []
    ok = bench.check_op("chunk_gated_delta_rule (1, 256, 4, 128)",
                        lambda **a: chunk_gated_delta_rule(**a, **bench.TRITON)[0],
                        lambda **a: bench.naive_recurrent_gated_delta_rule(**a)[0],
                        bench.gdn_inputs(1, 256, 4, 128))["passed"]
    fla_op = bench.fla("gated_delta_rule", "chunk_gated_delta_rule")
    for shape in FWD:
        inputs = bench.gdn_inputs(*shape)
        theirs = measure(f"fla fwd {shape}", bench.op_factory(fla_op, inputs, False)(), rows)
        ours = measure(f"no autograd fwd {shape}", forward(inputs, False), rows)
        ratios.append((shape, ours / theirs))
        measure(f"autograd fwd {shape}", forward(inputs, True), rows)
    print(f"\ncheck {'ok' if ok else 'FAILED'}")
    print(f"{'case':40s} {'wall':>7s} {'host':>7s} {'kernels':>8s} {'graphed':>8s}")
    for label, wall, host, kernel_sum, graph in rows:
        print(f"{label:40s} {wall:7.3f} {host:7.3f} {kernel_sum:8.3f} {graph:8.3f}")
    for shape, ratio in ratios:
        print(f"no autograd forward vs fla {shape}: {ratio:.3f}x (goal <= {bench.GDN_FLA_GOAL})")


if __name__ == "__main__":
    main()
