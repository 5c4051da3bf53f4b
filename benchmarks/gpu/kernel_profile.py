"""Where the time of relin's kernel ops goes on one GPU: per-kernel device time, host time per call, and the
autotuner's choice, at the shapes of ``benchmarks/gpu/kernel_bench.py`` (bf16 inputs).

For each case it prints the median wall time per call (``do_bench``), the host time per call (launches only,
measured while the GPU is idle so nothing waits), the sum of the op's kernel times and each kernel's share
(``torch.profiler``). Wall >> kernel sum means the case is bound by the host, not by the kernels; ``--host``
then splits one call's host time by Triton launch and torch op, on every thread (the backward runs on
autograd's device thread).

    source tools/gpu/env.sh; python3 benchmarks/gpu/kernel_profile.py --only gdn,dla,msr

Writes nothing; prints one block per case as it is measured and a summary table last.
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time

import kernel_bench as bench  # benchmarks/gpu/kernel_bench.py
import torch
from kernel_bench import TRITON, gdn_inputs, msr_inputs, msr_log_decays, op_factory
from torch.profiler import ProfilerActivity, profile, record_function
from triton.runtime.autotuner import Autotuner
from triton.runtime.jit import JITFunction
from triton.testing import do_bench

from relin.kernels import chunk_decayed_linear_attn, chunk_gated_delta_rule, multiscale_diag_retention

GDN_FWD = [(1, 4096, 16, 128), (1, 16384, 16, 128), (1, 65536, 16, 128), (8, 4096, 16, 128)]
GDN_FWD_BWD = [(1, 65536, 16, 128), (1, 4096, 16, 128)]
DLA = (1, 16384, 16, 256, 128)
MSR = (1, 262144, 1024, 8)


def cases(only):
    if "gdn" in only:
        for shape in GDN_FWD:
            yield f"gdn fwd {shape}", op_factory(chunk_gated_delta_rule, gdn_inputs(*shape), False, **TRITON)
        for shape in GDN_FWD_BWD:
            yield f"gdn fwd+bwd {shape}", op_factory(chunk_gated_delta_rule, gdn_inputs(*shape), True, **TRITON)
    if "dla" in only:
        x = bench.dla_inputs(*DLA)
        hedgehog = bench.hedgehog_inputs(x)
        for backward in (False, True):
            mode = "fwd+bwd" if backward else "fwd"
            yield f"dla {mode} {DLA}", op_factory(chunk_decayed_linear_attn, x, backward, **TRITON)
            yield f"dla normalize {mode} {DLA}", op_factory(chunk_decayed_linear_attn, hedgehog, backward,
                                                            normalize=True, **TRITON)
    if "msr" in only:
        x, log_decays = msr_inputs(*MSR), msr_log_decays(MSR[-1])
        for backward in (False, True):
            yield (f"msr {'fwd+bwd' if backward else 'fwd'} {MSR}",
                   op_factory(multiscale_diag_retention, x, backward, log_decays=log_decays, **TRITON))
    if "fla" in only:
        for shape in (GDN_FWD[2], GDN_FWD[3]):
            yield f"fla gdn fwd {shape}", op_factory(bench.fla("gated_delta_rule", "chunk_gated_delta_rule"),
                                                     gdn_inputs(*shape), False)


def host_ms_per_call(fn, calls=20):
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - start) / calls * 1e3
    torch.cuda.synchronize()
    return host


def graphed_ms(fn):
    """Median ms of ``fn`` captured once in a CUDA graph and replayed: the kernels with no host in between."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    ms = do_bench(graph.replay, warmup=10, rep=50, return_mode="median")
    del graph
    return ms


def python_profile(fn, calls=20, rows=30):
    """cProfile of ``calls`` calls (GPU left to run behind): Python functions by own time."""
    torch.cuda.synchronize()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(calls):
        fn()
    profiler.disable()
    torch.cuda.synchronize()
    print(f"cProfile, {calls} calls, by own time:")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(rows)


def kernel_times(fn):
    """[(kernel name, ms per call)] of one call, largest first."""
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / 1e3) for e in prof.key_averages() if e.device_time_total > 0]
    return sorted(rows, key=lambda r: -r[1])


def host_breakdown(fn, rows=25):
    """One call's host time by event, every thread: each Triton launch as ``launch <kernel>`` (the autotuner's
    and the JIT's dispatch nested), torch ops as themselves, autograd nodes as ``...Backward``."""
    patched = {}
    for cls in (JITFunction, Autotuner):
        original = cls.run

        def run(self, *args, _original=original, **kwargs):
            kernel = getattr(self, "fn", self)
            with record_function(f"launch {getattr(kernel, '__name__', type(kernel).__name__)}"):
                return _original(self, *args, **kwargs)
        patched[cls] = original
        cls.run = run
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    finally:
        for cls, original in patched.items():
            cls.run = original
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=rows))


def autotuners():
    """Every autotuned relin kernel, by name."""
    found = {}
    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("relin.kernels"):
            found.update((name, obj) for name, obj in vars(module).items() if isinstance(obj, Autotuner))
    return found


def print_tuning(tuners):
    """Each autotuner's measured configs (ms), best first: what a config change would buy."""
    for name, tuner in sorted(tuners.items()):
        timings = getattr(tuner, "configs_timings", None)
        if not timings:
            continue
        ranked = sorted(timings.items(), key=lambda item: item[1][0] if isinstance(item[1], list) else item[1])
        shown = ", ".join(f"{cfg} {t[0] if isinstance(t, list) else t:.3f}" for cfg, t in ranked[:6])
        print(f"  tuned {name}: {shown}")
        tuner.configs_timings = None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="gdn,dla,msr", help="subset of gdn, dla, msr, fla (fla's GDN forward)")
    parser.add_argument("--check", action="store_true",
                        help="first check the selected ops against their fp32 references (kernels.py's checks)")
    parser.add_argument("--host", action="store_true",
                        help="also split one call's host time by Triton launch and torch op (torch.profiler, CPU)")
    parser.add_argument("--graph", action="store_true",
                        help="also time each case captured in a CUDA graph (kernel time with no host gaps)")
    parser.add_argument("--cprofile", action="store_true",
                        help="also print a cProfile of the host side by Python function")
    parser.add_argument("--retune", action="store_true",
                        help="forget autotuning before each case (the keys hold no length or batch)")
    args = parser.parse_args()
    only = set(args.only.split(","))
    summary = []
    if args.check:
        if "gdn" in only:
            bench.check_op("chunk_gated_delta_rule", lambda **x: chunk_gated_delta_rule(**x, **TRITON)[0],
                           lambda **x: bench.naive_recurrent_gated_delta_rule(**x)[0],
                           gdn_inputs(1, 256, 4, 128))
        if "dla" in only:
            for normalize in (False, True):
                x = bench.dla_inputs(1, 256, 4, 256, 128)
                x = bench.hedgehog_inputs(x) if normalize else x
                bench.check_op(f"chunk_decayed_linear_attn{' normalize' * normalize}",
                               lambda **x: chunk_decayed_linear_attn(**x, normalize=normalize, **TRITON)[0],
                               lambda **x: bench.naive_recurrent_decayed_linear_attn(**x, normalize=normalize)[0], x)
    for name, factory in cases(only):
        if args.retune:
            for tuner in autotuners().values():
                tuner.cache.clear()
        fn = factory()
        fn()
        torch.cuda.synchronize()
        wall = do_bench(fn, warmup=10, rep=50, return_mode="median")
        host = host_ms_per_call(fn)
        rows = kernel_times(fn)
        total = sum(ms for _, ms in rows)
        graph = graphed_ms(fn) if args.graph else float("nan")
        print(f"\n{name}: wall {wall:.3f} ms, host {host:.3f} ms, kernels {total:.3f} ms, graphed {graph:.3f} ms",
              flush=True)
        for kernel, ms in rows[:12]:
            print(f"  {ms:8.3f} ms  {kernel[:100]}")
        print_tuning(autotuners())
        if args.host:
            host_breakdown(fn)
        if args.cprofile:
            python_profile(fn)
        summary.append((name, wall, host, total, graph))
        del fn
        torch.cuda.empty_cache()
    print(f"\n{'case':48s} {'wall ms':>9s} {'host ms':>9s} {'kernels ms':>11s} {'graphed ms':>11s}")
    for name, wall, host, total, graph in summary:
        print(f"{name:48s} {wall:9.3f} {host:9.3f} {total:11.3f} {graph:11.3f}")


if __name__ == "__main__":
    main()
