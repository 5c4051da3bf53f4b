"""relin's chunked gated delta rule against FlashQLA and fla, in one process, on the same inputs (issue #51).

Libraries, each timed forward (no input requires a gradient) and forward+backward (gradients of q, k, v, g, beta
for one fixed upstream gradient), bf16 q/k/v/beta, fp32 log-decay g, H = 16 heads of K = V = 128:

- ``relin``: ``relin.kernels.chunk_gated_delta_rule(..., backend="triton")`` with ``RELIN_GDN_CP=0``: its serial
  passes over whole sequences (the default until the segments are measured; the kernels as before issue #66);
- ``relin_cp``: the same with ``RELIN_GDN_CP=auto``: its serial passes on segments where its rule splits them
  (``relin.kernels.gated_delta_rule.segments``; issue #66's before/after, one process);
- ``flash_qla``: QwenLM's FlashQLA (TileLang) ``flash_qla.chunk_gated_delta_rule``, with its defaults (auto
  intra-card context parallelism);
- ``fla_triton``: fla 0.6.0's ``chunk_gated_delta_rule`` with its backend dispatch pinned to the Triton kernels
  (``FLA_FLASH_QLA=0`` and ``FLA_TILELANG=0`` around each call). On Hopper with Triton < 3.7.1 its gated
  backward refuses to run (fla #640): that refusal is recorded, and ``fla_triton+tl_dqkwg`` times the
  backward fla itself picks there (Triton, with the one kernel ``chunk_bwd_dqkwg`` dispatched to TileLang);
- ``fla_default``: fla with its dispatch left alone, which hands GDN to FlashQLA when that is installed
  (forward timed, as users get it).

Which backend each fla call ran is read from fla's own dispatch log (``fla.backends``) and recorded per cell.

Cells: (B, T) = (1, 4K), (1, 16K), (1, 32K), (1, 64K), (8, 4K), and a mixed varlen batch (B = 1, cu_seqlens of
eight sequences from 17000 down to 28 tokens, 32K in all). Each cell has two floors, at the H200's datasheet
peaks (4.8 TB/s HBM3e, 989 TFLOP/s dense bf16) and at the ceilings measured in this run (a device-to-device copy,
an 8192^3 bf16 matmul):

- bytes once: every tensor the timed region reads (q, k, v, g, beta; and the upstream gradient do) and writes
  (o; and dq, dk, dv, dg, dbeta) moved exactly once, nothing else;
- FLOPs: the tensor-core products of the chunked algorithm (chunk C = 64; per token and head
  6KV + 6CK + 4CV forward: K K^T, W, U, Q K^T, A delta, and the state's read, update and output), and three
  times that for forward+backward (each product's two gradient products, no recomputation).

Every library's output (and gradients) is compared with relin's on each cell (relative RMS, max abs diff), and
with an fp64 oracle (``--oracle``, on by default on a GPU): the chunked PyTorch form
(``relin.kernels.gated_delta_rule.torch_chunk``) on the same inputs cast to float64, its gradients by autograd.
Writes one JSON (``--out``, default $OUT/gdn_public.json) and prints a table last.

    source tools/gpu/env.sh && python3 benchmarks/gpu/gdn_public.py --out $OUT
    python3 benchmarks/gpu/gdn_public.py --warm-only flash_qla    # compile FlashQLA's TileLang kernels only
    TRITON_INTERPRET=1 python benchmarks/gpu/gdn_public.py --quick --out /tmp/x   # CPU dry run, relin only
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from kernel_bench import bench  # benchmarks/gpu/kernel_bench.py

from relin.envelope import Envelope
from relin.kernels import chunk_gated_delta_rule

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16
CHUNK = 64
PEAK_HBM_BYTES_PER_S = 4.8e12  # H200 SXM datasheet
PEAK_BF16_FLOP_PER_S = 989e12  # H200 SXM datasheet, dense bf16 tensor cores
VARLEN_LENGTHS = [17000, 8192, 4100, 2048, 1000, 300, 100, 28]  # 32768 tokens
CELLS = [(1, 4096, None), (1, 16384, None), (1, 32768, None), (1, 65536, None), (8, 4096, None),
         (1, sum(VARLEN_LENGTHS), VARLEN_LENGTHS)]
QUICK_CELLS = [(1, 128, None), (2, 64, None), (1, 200, [100, 37, 63])]
LIBS = ["relin", "relin_cp", "flash_qla", "fla_triton", "fla_triton+tl_dqkwg", "fla_default"]
RELIN_LIBS = {"relin": {"RELIN_GDN_CP": "0"}, "relin_cp": {"RELIN_GDN_CP": "auto"}}  # environment around each call
# Distributions whose versions the envelope records beside torch and triton: the libraries and TileLang's tree.
LIBRARIES = ("fla-core", "flash-qla", "tilelang", "apache-tvm-ffi", "z3-solver")
FLA_ENV = {  # FLA_FLASH_QLA / FLA_TILELANG around each call of that library
    "fla_triton": {"FLA_FLASH_QLA": "0", "FLA_TILELANG": "0"},
    "fla_triton+tl_dqkwg": {"FLA_FLASH_QLA": "0", "FLA_TILELANG": "1"},
    "fla_default": {},
}
GRADS = ("q", "k", "v", "g", "beta")
LIB_ENV = {**RELIN_LIBS, **FLA_ENV}


# ---------------------------------------------------------------------------------------------- floors
def floors(B, T, H, K, V, backward, bandwidth=PEAK_HBM_BYTES_PER_S, flop_rate=PEAK_BF16_FLOP_PER_S,
           g_bytes=4, beta_bytes=2, element=2):
    """Bytes-once and FLOP lower bounds of one cell: {bytes, flops, bytes_ms, flop_ms, floor_ms, bound}."""
    n = B * T * H  # token-heads
    read = n * (element * (2 * K + V) + g_bytes + beta_bytes)  # q, k, v, g, beta
    write = n * element * V  # o
    if backward:
        read += n * element * V  # do
        write += n * (element * (2 * K + V) + 4 + beta_bytes)  # dq, dk, dv, dg (fp32 like g), dbeta
    flops = n * (6 * K * V + 6 * CHUNK * K + 4 * CHUNK * V) * (3 if backward else 1)
    nbytes = read + write
    bytes_ms, flop_ms = nbytes / bandwidth * 1e3, flops / flop_rate * 1e3
    return {"bytes": nbytes, "flops": flops, "bytes_ms": bytes_ms, "flop_ms": flop_ms,
            "floor_ms": max(bytes_ms, flop_ms), "bound": "bytes" if bytes_ms >= flop_ms else "flops"}


# ---------------------------------------------------------------------------------------------- inputs
def make_inputs(B, T, H, K, V, generator):
    r = lambda *s: torch.randn(*s, generator=generator, device=DEVICE)  # noqa: E731
    return dict(q=r(B, T, H, K).to(DTYPE), k=F.normalize(r(B, T, H, K), dim=-1).to(DTYPE), v=r(B, T, H, V).to(DTYPE),
                g=F.logsigmoid(r(B, T, H)), beta=torch.sigmoid(r(B, T, H)).to(DTYPE))


def cu_seqlens_of(lengths):
    if lengths is None:
        return None, None
    bounds = [0]
    for n in lengths:
        bounds.append(bounds[-1] + n)
    cpu = torch.tensor(bounds, dtype=torch.long)
    return cpu, cpu.to(DEVICE)


# ---------------------------------------------------------------------------------------------- libraries
@contextlib.contextmanager
def environ(values):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class FlaLog(logging.Handler):
    """Collects fla's ``[FLA Backend]`` dispatch lines; ``probe`` clears fla's once-per-key memory first."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.lines, self.last = [], None

    def emit(self, record):
        self.lines.append(record.getMessage())

    def probe(self, fn):
        try:
            backends = importlib.import_module("fla.backends")
            for registry in list(backends._operation_registries.values()) + list(
                    backends._function_registries.values()):
                registry._logged.clear()
        except Exception:  # noqa: BLE001
            pass
        start = len(self.lines)
        try:
            fn()
        finally:  # a refusal (fla's Triton-version guard) still leaves what was dispatched before it
            lines = [line for line in self.lines[start:] if "FLA Backend" in line]
            ran = [line.split("] ", 1)[-1] for line in lines if "rejected" not in line]
            self.last = {"dispatched": ran or ["no dispatch: fla's own Triton kernels"], "log": lines}
        return self.last


def load_libraries():
    """{name: op or None}, {name: import error}; fla's log handler."""
    ops, errors = {"relin": chunk_gated_delta_rule, "relin_cp": chunk_gated_delta_rule}, {}
    try:
        import flash_qla
        ops["flash_qla"] = flash_qla.chunk_gated_delta_rule
    except Exception as error:  # noqa: BLE001
        errors["flash_qla"] = f"{type(error).__name__}: {str(error)[:500]}"
    log = FlaLog()
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_gdn
        fla_logger = logging.getLogger("fla")
        fla_logger.setLevel(logging.INFO)
        fla_logger.addHandler(log)
        for name in FLA_ENV:
            ops[name] = fla_gdn
    except Exception as error:  # noqa: BLE001
        for name in FLA_ENV:
            errors[name] = f"{type(error).__name__}: {str(error)[:500]}"
    return ops, errors, log


def call(lib, op, x, cu_cpu, cu_dev):
    """One forward of library ``lib``; returns o."""
    if lib in RELIN_LIBS:
        with environ(RELIN_LIBS[lib]):
            return op(**x, cu_seqlens=cu_cpu, backend="triton")[0]
    if lib == "flash_qla":
        return op(**x, cu_seqlens=cu_dev)[0]
    kwargs = {} if cu_dev is None else {"cu_seqlens": cu_dev, "cu_seqlens_cpu": cu_cpu}
    with environ(FLA_ENV[lib]):
        return op(**x, **kwargs)[0]


def runner(lib, op, x, cu_cpu, cu_dev, do, backward):
    """fn() timing one forward, or one forward and backward (gradients returned, not accumulated)."""
    if not backward:
        leaves = {k: t.detach() for k, t in x.items()}
        return lambda: call(lib, op, leaves, cu_cpu, cu_dev)
    leaves = {k: t.detach().clone().requires_grad_() for k, t in x.items()}

    def run():
        o = call(lib, op, leaves, cu_cpu, cu_dev)
        with environ(LIB_ENV.get(lib, {})):
            return (o,) + torch.autograd.grad(o, [leaves[k] for k in GRADS], do)
    return run


def device_ms(fn, wall_ms, reps):
    """Median ms of the GPU work alone: before each timed call the GPU sleeps (after an L2 flush) for about as long
    as the call's wall time, so the host queues the call's launches ahead and its launch overhead stays out of the
    events' interval. A call that waits for the GPU on the host (a .item(), a device-to-host copy) still pays that
    wait. None off a GPU."""
    if DEVICE != "cuda":
        return None
    flush = torch.empty(256 * 2**20 // 4, dtype=torch.int32, device=DEVICE)
    cycles = int(min(max(wall_ms, 1.0), 30.0) * 2.0e6)  # ~1.98 GHz SM clock under load
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    for start, end in events:
        flush.zero_()
        torch.cuda._sleep(cycles)
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def fp64_oracle(x, lengths, do, backward):
    """o (and the gradients of q, k, v, g, beta) of the chunked PyTorch form in float64 on the same inputs."""
    from relin.kernels.gated_delta_rule.torch_chunk import _chunk_sequence
    leaves = {k: t.detach().double().requires_grad_(backward) for k, t in x.items()}
    B, T, H, K = leaves["q"].shape
    V = leaves["v"].shape[-1]
    bounds = [0, T] if lengths is None else [0, *torch.tensor(lengths).cumsum(0).tolist()]
    pieces = []
    for s, e in zip(bounds[:-1], bounds[1:]):
        # [T, B * H, D]: the sequences of an equal-length batch become heads, as in torch_chunk.
        seq = {k: t[:, s:e].transpose(0, 1).reshape(e - s, B * H, *t.shape[3:]) for k, t in leaves.items()}
        o, _ = _chunk_sequence(seq["q"], seq["k"], seq["v"], seq["g"], seq["beta"], K ** -0.5,
                               seq["q"].new_zeros(B * H, K, V), CHUNK)
        pieces.append(o.reshape(e - s, B, H, V).transpose(0, 1))
    o = torch.cat(pieces, 1)
    if not backward:
        return (o.detach(),)
    return (o.detach(),) + torch.autograd.grad(o, [leaves[k] for k in GRADS], do.double())


def agreement(ref, out):
    ref, out = ref.detach().double(), out.detach().double()
    rel = ((out - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30)).item()
    return {"rel_rms": rel, "max_abs": (out - ref).abs().max().item()}


def error_text(error):
    return f"{type(error).__name__}: {str(error)[:400]}"


# ---------------------------------------------------------------------------------------------- ceilings
def measure_ceilings(quick):
    if DEVICE != "cuda":
        return {"copy_bytes_per_s": None, "matmul_flop_per_s": None}
    numel = 2**20 if quick else 2**30
    src, dst = torch.randn(numel, device=DEVICE).to(DTYPE), torch.empty(numel, device=DEVICE, dtype=DTYPE)
    copy_ms = bench(lambda: dst.copy_(src), 25, 100)
    n = 1024 if quick else 8192
    a, b = torch.randn(n, n, device=DEVICE).to(DTYPE), torch.randn(n, n, device=DEVICE).to(DTYPE)
    mm_ms = bench(lambda: a @ b, 25, 200)
    return {"copy_bytes_per_s": 4 * numel / (copy_ms * 1e-3), "copy_ms": copy_ms, "copy_bytes": 4 * numel,
            "matmul_flop_per_s": 2 * n**3 / (mm_ms * 1e-3), "matmul_ms": mm_ms, "matmul_n": n}


# ---------------------------------------------------------------------------------------------- environment
def toolchain():
    """What the envelope does not record: the CUDA compiler TileLang builds with and the driver."""
    out = {}
    try:
        out["nvcc"] = subprocess.run(["nvcc", "--version"], capture_output=True, text=True,
                                     timeout=30).stdout.strip().splitlines()[-1]
    except Exception as error:  # noqa: BLE001
        out["nvcc"] = error_text(error)
    try:
        out["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                       capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as error:  # noqa: BLE001
        out["driver"] = error_text(error)
    return out


# ---------------------------------------------------------------------------------------------- run
def cell_label(B, T, lengths):
    return f"B={B} T={T}" + (f" varlen({len(lengths)})" if lengths else "")


def run_cell(B, T, lengths, H, K, V, ops, log, args, ceilings, deadline, generator):
    label = cell_label(B, T, lengths)
    cu_cpu, cu_dev = cu_seqlens_of(lengths)
    x = make_inputs(B, T, H, K, V, generator)
    do = torch.randn(B, T, H, V, generator=generator, device=DEVICE).to(DTYPE)
    cells = []
    for backward in (False, True):
        mode = "fwd+bwd" if backward else "fwd"
        row = {"cell": label, "B": B, "T": T, "H": H, "K": K, "V": V, "seq_lengths": lengths, "mode": mode,
               "floors_peak": floors(B, T, H, K, V, backward), "ms": {}, "device_ms": {}, "errors": {}, "agreement": {},
               "dispatch": {}}
        if ceilings.get("copy_bytes_per_s"):
            row["floors_measured"] = floors(B, T, H, K, V, backward, ceilings["copy_bytes_per_s"],
                                            ceilings["matmul_flop_per_s"])
        reference, oracle = None, None
        if args.oracle and time.monotonic() < deadline:
            try:
                start = time.monotonic()
                oracle = fp64_oracle(x, lengths, do, backward)
                row["oracle_s"] = time.monotonic() - start
            except Exception as error:  # noqa: BLE001 - recorded (memory at the longest cells)
                row["errors"]["fp64_oracle"] = error_text(error)
            if DEVICE == "cuda":
                torch.cuda.empty_cache()
        row["vs_fp64"] = {}
        for lib in LIBS:
            if lib == "fla_triton+tl_dqkwg" and not backward:
                continue  # the same forward as fla_triton
            if lib == "fla_default" and backward and not args.fla_default_backward:
                continue
            if lib not in ops:
                row["errors"][lib] = "not importable (see env.import_errors)"
                continue
            if time.monotonic() > deadline:
                row["errors"][lib] = "skipped: time budget"
                continue
            try:
                fn = runner(lib, ops[lib], x, cu_cpu, cu_dev, do, backward)
                if lib in FLA_ENV:
                    log.last = None
                    try:
                        log.probe(fn)
                    finally:
                        row["dispatch"][lib] = log.last
                out = fn()
                out = out if isinstance(out, tuple) else (out,)
                names = ("o",) + tuple("d" + k for k in GRADS)
                if lib == "relin":
                    reference = out
                elif reference is not None:
                    row["agreement"][lib] = {n: agreement(r, o) for n, r, o in zip(names, reference, out)}
                if oracle is not None:
                    row["vs_fp64"][lib] = {n: agreement(r, o) for n, r, o in zip(names, oracle, out)}
                del out
                row["ms"][lib] = bench(fn, args.warmup_ms, args.rep_ms)
                row["device_ms"][lib] = device_ms(fn, row["ms"][lib], args.device_reps)
            except Exception as error:  # noqa: BLE001 - recorded: fla's Triton-version guard, a TileLang failure
                row["errors"][lib] = error_text(error)
            if DEVICE == "cuda":
                torch.cuda.synchronize()
                torch.cuda.empty_cache()
            shown = f"{row['ms'][lib]:9.3f} ms" if lib in row["ms"] else "ERROR " + row["errors"].get(lib, "")[:150]
            print(f"{label:22s} {mode:8s} {lib:22s} {shown}", flush=True)
        del oracle
        ratios(row)
        cells.append(row)
    del x, do
    return cells


def ratios(row):
    """relin (and relin_cp) over each other library, over the fastest of them, and every library over the floor;
    for the wall times (``ratios``) and the queued device times (``device_ratios``). fla_default is FlashQLA behind
    fla's dispatch, so it is not a rival of its own."""
    for key, name in (("ms", "ratios"), ("device_ms", "device_ratios")):
        ms = {k: v for k, v in row[key].items() if v is not None}
        rivals = {k: v for k, v in ms.items() if k not in (*RELIN_LIBS, "fla_default")}
        out = {}
        if "relin" in ms and "relin_cp" in ms:
            out["relin_cp/relin"] = ms["relin_cp"] / ms["relin"]
        for ours in (lib for lib in RELIN_LIBS if lib in ms):
            for k, v in rivals.items():
                out[f"{ours}/{k}"] = ms[ours] / v
            if rivals:
                fastest = min(rivals, key=rivals.get)
                out["fastest_other"] = fastest
                out[f"{ours}/fastest_other"] = ms[ours] / rivals[fastest]
        for k, v in ms.items():
            out[f"{k}/floor_peak"] = v / row["floors_peak"]["floor_ms"]
        row[name] = out


def warm_only(lib, ops, cells, H, K, V, generator):
    """Run each cell once forward and once forward+backward with ``lib``: compiles its kernels, times nothing."""
    for B, T, lengths in cells:
        cu_cpu, cu_dev = cu_seqlens_of(lengths)
        x = make_inputs(B, T, H, K, V, generator)
        do = torch.randn(B, T, H, V, generator=generator, device=DEVICE).to(DTYPE)
        for backward in (False, True):
            start = time.monotonic()
            try:
                runner(lib, ops[lib], x, cu_cpu, cu_dev, do, backward)()
                torch.cuda.synchronize()
                status = "ok"
            except Exception as error:  # noqa: BLE001
                status = error_text(error)
            print(f"warm {lib} {cell_label(B, T, lengths)} {'fwd+bwd' if backward else 'fwd'}: "
                  f"{time.monotonic() - start:.1f} s {status}", flush=True)
        del x, do
        torch.cuda.empty_cache()


def print_table(cells):
    print_block(cells, "ms", "ratios", "wall ms (do_bench medians, launch overhead included)")
    print_block(cells, "device_ms", "device_ratios", "device ms (launches queued behind a GPU sleep)")
    print_accuracy(cells)
    for r in cells:
        for lib, err in r["errors"].items():
            print(f"  {r['cell']} {r['mode']} {lib}: {err[:160]}")


def print_block(cells, key, ratio_key, title):
    print(f"\n{title}")
    head = (f"{'cell':22s} {'mode':8s} {'relin':>8s} {'cp':>8s} {'FlashQLA':>8s} {'fla-tri':>8s} {'fla-tl':>8s} "
            f"{'fla-dflt':>8s} {'cp/r':>6s} {'r/QLA':>6s} {'cp/QLA':>6s} {'r/fla':>6s} {'r/best':>6s} {'cp/bst':>6s} "
            f"{'floor':>7s} {'bytes':>7s} {'flop':>7s}")
    print(head + "\n" + "-" * len(head))
    for r in cells:
        ms, ra, fl = r[key], r[ratio_key], r["floors_peak"]
        f = lambda k: f"{ms[k]:8.3f}" if ms.get(k) is not None else f"{'-':>8s}"  # noqa: E731
        g = lambda k: f"{ra[k]:6.2f}" if k in ra else f"{'-':>6s}"  # noqa: E731
        fla_ratio = "relin/fla_triton" if "relin/fla_triton" in ra else "relin/fla_triton+tl_dqkwg"
        print(f"{r['cell']:22s} {r['mode']:8s} {f('relin')} {f('relin_cp')} {f('flash_qla')} {f('fla_triton')} "
              f"{f('fla_triton+tl_dqkwg')} {f('fla_default')} {g('relin_cp/relin')} {g('relin/flash_qla')} "
              f"{g('relin_cp/flash_qla')} {g(fla_ratio)} {g('relin/fastest_other')} {g('relin_cp/fastest_other')} "
              f"{fl['floor_ms']:7.3f} {fl['bytes_ms']:7.3f} {fl['flop_ms']:7.3f}")
    print("floor = max(bytes once at 4.8 TB/s, FLOPs at 989 TFLOP/s); fla-tri: dispatch pinned to Triton; "
          "fla-tl: Triton with chunk_bwd_dqkwg on TileLang; fla-dflt: fla's own dispatch (-> FlashQLA)")


def print_accuracy(cells):
    """The largest relative RMS error against the fp64 oracle over o and the five gradients, per library."""
    libs = [lib for lib in LIBS if any(lib in r.get("vs_fp64", {}) for r in cells)]
    if not libs:
        return
    print("\nlargest relative RMS error against the fp64 oracle (o and every gradient)")
    print(f"{'cell':22s} {'mode':8s} " + " ".join(f"{lib[:10]:>10s}" for lib in libs))
    for r in cells:
        worst = {lib: max(a["rel_rms"] for a in r["vs_fp64"][lib].values()) for lib in libs if lib in r["vs_fp64"]}
        print(f"{r['cell']:22s} {r['mode']:8s} "
              + " ".join(f"{worst[lib]:10.2e}" if lib in worst else f"{'-':>10s}" for lib in libs))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="output file or folder (default $OUT/gdn_public.json, else "
                                      "benchmarks/results/local/gdn_public.json)")
    parser.add_argument("--quick", action="store_true", help="tiny shapes (a CPU dry run under TRITON_INTERPRET=1)")
    parser.add_argument("--cells", help="comma-separated indices into the cell list (default all)")
    parser.add_argument("--budget-s", type=float, default=520.0,
                        help="skip (and record as skipped) what would start after this many seconds")
    parser.add_argument("--warmup-ms", type=float, default=25.0)
    parser.add_argument("--rep-ms", type=float, default=100.0)
    parser.add_argument("--device-reps", type=int, default=15, help="timed calls of the queued (device-only) time")
    parser.add_argument("--fla-default-backward", action="store_true", help="also time fla_default fwd+bwd")
    parser.add_argument("--libs", help=f"comma-separated libraries to time, of {', '.join(LIBS)} (default all)")
    parser.add_argument("--oracle", action=argparse.BooleanOptionalAction, default=DEVICE == "cuda",
                        help="compare every library with the fp64 chunked oracle (default on a GPU)")
    parser.add_argument("--warm-only", choices=["flash_qla", "relin", "relin_cp", "fla_triton",
                                                "fla_triton+tl_dqkwg"],
                        help="run every cell once with this library to compile its kernels; no timing, no JSON")
    parser.add_argument("--seed", type=int)
    Envelope.add_argument(parser)
    args = parser.parse_args(argv)
    if DEVICE == "cpu" and not (args.quick and os.environ.get("TRITON_INTERPRET") == "1"):
        parser.error("without a GPU only `TRITON_INTERPRET=1 ... --quick` can run")
    start = time.monotonic()
    H, K, V = (2, 32, 32) if args.quick else (16, 128, 128)
    cells = QUICK_CELLS if args.quick else CELLS
    if args.cells:
        cells = [cells[int(i)] for i in args.cells.split(",")]
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    if args.libs:
        unknown = set(args.libs.split(",")) - set(LIBS)
        if unknown:
            parser.error(f"--libs: unknown {', '.join(sorted(unknown))}; expected of {', '.join(LIBS)}")
        LIBS[:] = [lib for lib in LIBS if lib in args.libs.split(",")]
    ops, import_errors, log = load_libraries()
    if args.warm_only:
        if args.warm_only not in ops:
            print(f"{args.warm_only} not importable: {import_errors.get(args.warm_only)}")
            return 1
        warm_only(args.warm_only, ops, cells, H, K, V, generator)
        return 0
    envelope = Envelope.start("gdn_public", allow_dirty=args.allow_dirty, packages=LIBRARIES)
    env = {**toolchain(), "device": DEVICE, "seed": seed, "triton_interpret": os.environ.get("TRITON_INTERPRET", "0"),
           "import_errors": import_errors,
           "fla_env": {k: os.environ.get(k) for k in ("FLA_DISABLE_BACKEND_DISPATCH", "FLA_FLASH_QLA", "FLA_TILELANG")}}
    print(json.dumps(env), flush=True)
    ceilings = measure_ceilings(args.quick)
    print(f"ceilings: {ceilings}", flush=True)
    deadline = start + args.budget_s
    out = Path(args.out) if args.out else Path(os.environ.get("OUT") or
                                               Path(__file__).parents[1] / "results" / "local")
    if out.suffix != ".json":
        out = out / "gdn_public.json"
    rows = []
    for B, T, lengths in cells:
        rows += run_cell(B, T, lengths, H, K, V, ops, log, args, ceilings, deadline, generator)
        write(envelope, out, args, env, H, K, V, ceilings, rows, start, complete=len(rows) == 2 * len(cells))
    print_table(rows)
    print(f"\nwrote {out} ({time.monotonic() - start:.0f} s)")
    return 0


def write(envelope, out, args, env, H, K, V, ceilings, rows, start, complete):
    """The JSON, rewritten after every cell so that a run stopped by its time limit keeps what it measured."""
    result = {
        "issue": 66, "env": env, "quick": args.quick, "dtype": "bf16 q/k/v/beta, fp32 g",
        "heads": {"H": H, "K": K, "V": V}, "peaks": {"hbm_bytes_per_s": PEAK_HBM_BYTES_PER_S,
                                                    "bf16_flop_per_s": PEAK_BF16_FLOP_PER_S},
        "ceilings_measured": ceilings, "timing": {"do_bench_warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms,
                                                  "statistic": "median", "fwd": "no input requires grad",
                                                  "fwd+bwd": "forward + torch.autograd.grad of q,k,v,g,beta"},
        "cu_seqlens": "relin: CPU tensor (its API reads it on the host); flash_qla: device tensor; "
                      "fla: device tensor and cu_seqlens_cpu",
        "floor_definition": floors.__doc__ + " FLOPs per token-head: (6KV + 6CK + 4CV)(1 or 3), C = 64; bytes: "
                            "inputs read once + outputs written once",
        "complete": complete, "cells": rows, "wall_s": time.monotonic() - start}
    envelope.write(out, result)


if __name__ == "__main__":
    sys.exit(main())
