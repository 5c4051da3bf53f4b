"""Peak memory and time of one bridge's forward over N visual patches (seed 000's memory-vs-N benchmark).

Both count what torch's allocator hands out (``method`` ``allocator``), not what the process holds: on CUDA,
``torch.cuda.max_memory_allocated`` above the inputs and weights, an out-of-memory error recorded as ``oom``; on the
CPU, the high-water mark of the bytes allocated during the forward, summed in time order from every allocation and
free torch's profiler records (a process's resident pages, which the allocator's caching and the OS's page granularity
blur, would not resolve a growth exponent at small N). A CPU point whose N x N attention scores alone would pass
``max_bytes`` is recorded as ``skipped`` instead of run.
"""
from __future__ import annotations

import time

import torch

from ..config.lia_mtr import BridgeConfig, MTRConfig
from ..layers.bridges import Bridge


def bridge_options(name: str, impl: str, num_scales: int) -> BridgeConfig:
    return BridgeConfig(mtr=MTRConfig(num_scales=num_scales), attention_heads=8 if name == "mha" else 4,
                        mha_impl=impl, causal=True)


def attention_bytes(n: int, heads: int = 8, dtype_bytes: int = 4) -> int:
    """Bytes of one [1, H, N, N] score matrix (the naive MHA bridge forms two: scores and softmax)."""
    return heads * n * n * dtype_bytes


def _forward(name: str, impl: str, n: int, d_in: int, d_out: int, num_scales: int, device: str, dtype):
    torch.manual_seed(0)
    bridge = Bridge(name, d_in, d_out, bridge_options(name, impl, num_scales)).to(device, dtype).eval()
    x = torch.randn(1, n, d_in, device=device, dtype=dtype)
    return bridge, x


def measure_cuda(name: str, impl: str, n: int, d_in: int, d_out: int, num_scales: int, dtype=torch.bfloat16,
                 repeats: int = 5) -> dict:
    """One point on the GPU: peak bytes above the inputs, median ms of ``repeats`` forwards, or ``oom``.

    ``peak_bytes`` is ``max_memory_allocated`` minus the inputs' and weights' baseline ``base_bytes``;
    ``peak_abs_bytes`` the absolute high-water mark of the same forward.
    """
    try:
        bridge, x = _forward(name, impl, n, d_in, d_out, num_scales, "cuda", dtype)
        with torch.no_grad():
            bridge(x)  # compiles the Triton kernels outside the measurement
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            bridge(x)
            torch.cuda.synchronize()
            peak_abs = torch.cuda.max_memory_allocated()
            times = []
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                bridge(x)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
        return {"status": "ok", "peak_bytes": int(peak_abs - base), "peak_abs_bytes": int(peak_abs),
                "base_bytes": int(base), "ms": sorted(times)[len(times) // 2], "method": "allocator"}
    except torch.cuda.OutOfMemoryError:
        return {"status": "oom", "peak_bytes": None, "peak_abs_bytes": None, "base_bytes": None, "ms": None,
                "method": "allocator"}
    finally:
        torch.cuda.empty_cache()


def allocated_peak(fn) -> int:
    """The most bytes torch's CPU allocator held at once during ``fn()``, above its level when ``fn`` started: every
    allocation and free the profiler records (``profile_memory``), summed in time order."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted((e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"),
                    key=lambda e: e.start_ns())
    level = peak = 0
    for event in events:
        level += event.nbytes()
        peak = max(peak, level)
    return peak


def measure_cpu(name: str, impl: str, n: int, d_in: int, d_out: int, num_scales: int, max_bytes: int) -> dict:
    """One point on the CPU: the allocator's peak during the forward (:func:`allocated_peak`) and the time of that
    forward (the profiler's bookkeeping included: a figure of the machine, for MLflow)."""
    if name == "mha" and impl == "naive" and 2 * attention_bytes(n) > max_bytes:
        return {"status": "skipped", "peak_bytes": None, "ms": None, "method": "allocator"}
    bridge, x = _forward(name, impl, n, d_in, d_out, num_scales, "cpu", torch.float32)
    with torch.no_grad():
        bridge(x[:, :8])
        start = time.perf_counter()
        peak = allocated_peak(lambda: bridge(x))
        ms = 1000 * (time.perf_counter() - start)
    return {"status": "ok", "peak_bytes": peak, "ms": ms, "method": "allocator"}


def variants(bridges: list[str], mha_impls: list[str]) -> list[tuple[str, str]]:
    """``(bridge, mha implementation)`` pairs measured: every mha implementation, one row for the others."""
    return [(b, impl) for b in bridges for impl in (mha_impls if b == "mha" else ["-"])]


def growth_exponent(rows: list[dict]) -> float | None:
    """Least-squares slope of log peak against log N over the measured points (1: linear, 2: quadratic)."""
    import math

    points = [(math.log(r["n"]), math.log(r["peak_bytes"])) for r in rows if r["status"] == "ok" and r["peak_bytes"]]
    if len(points) < 2:
        return None
    mx, my = sum(p[0] for p in points) / len(points), sum(p[1] for p in points) / len(points)
    var = sum((p[0] - mx) ** 2 for p in points)
    return round(sum((p[0] - mx) * (p[1] - my) for p in points) / var, 3) if var else None
