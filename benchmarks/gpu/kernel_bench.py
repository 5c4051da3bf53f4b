"""Time relin's three kernel ops against fla 0.6.0 and torch SDPA in one run (bf16 inputs).

Shapes are those of ``/work/shared/anchors/h200-fla-sdpa.json``:
- gated delta rule (OPAL) forward at (B, T, H, D) = (1,4K,16,128), (1,16K,16,128), (1,64K,16,128),
  (8,4K,16,128) (goal <= 0.85x fla), fwd+bwd at (1,64K,16,128) (goal >= 14x faster than SDPA causal);
- decayed linear attention (HedgeMamba) fwd and fwd+bwd at (1,16K,16, K=256, V=128); baselines fla
  ``chunk_simple_gla`` and SDPA causal at D=128 (fwd+bwd goal >= 5x faster than SDPA); its Hedgehog form
  (softmax features, no decay, normalize=True) beside the same SDPA (goals fwd <= 0.6 ms, fwd+bwd <= 2.5 ms);
- multiscale diagonal retention (LIA-MTR) at B=1, T=262,144, C=1024, S=8, fwd and fwd+bwd, against
  the time to move its bytes once at the copy bandwidth measured in this run (device-to-device copy),
  and against fla's closest equivalent (``chunk_hgrn`` over the S-expanded [B, T, S·C] input).

Every relin op is first checked against its fp32 reference (outputs and gradients, relative RMS,
fla's bf16 tolerances) at a small shape; an op that fails reports no ratio. fla is imported lazily
and any error it raises (e.g. its guard against gated backward on Triton 3.6) is recorded.

    python benchmarks/gpu/kernel_bench.py --only dla,gdn   # a fresh H200 compiles and autotunes first (minutes)
    TRITON_INTERPRET=1 python benchmarks/gpu/kernel_bench.py --quick      # tiny shapes, also on a CPU

Writes one JSON per run, ``kernels.json`` in ``--out`` (default $OUT, else benchmarks/results/, the current figures):
the envelope (:mod:`relin.envelope`: commit, GPU, versions), fla's version, every timing with its shape, and
every comparison with its baseline, ratio and goal; prints a table last.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from relin.envelope import Envelope
from relin.kernels import chunk_decayed_linear_attn, chunk_gated_delta_rule, multiscale_diag_retention
from relin.kernels.decayed_linear_attn import naive_recurrent_decayed_linear_attn
from relin.kernels.gated_delta_rule import naive_recurrent_gated_delta_rule
from relin.kernels.multiscale_retention import naive_multiscale_diag_retention

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16
# fla's test_gdn ratios for half-precision inputs: output, most gradients, gate-like gradients.
TOLERANCE = {"o": 0.005, "grad": 0.008, "gate_grad": 0.02}
GATE_LIKE = {"g", "beta", "gate", "mix"}
MSR_FLOOR_GOAL = 2.0  # relin multiscale retention within 2x of its bytes-once time
GDN_FLA_GOAL = 0.85  # gated delta rule forward: at most 0.85x fla's time
GDN_SDPA_GOAL = 1 / 14  # gated delta rule fwd+bwd at 64K tokens: 14x faster than causal SDPA
DLA_SDPA_GOAL = 0.2  # decayed linear attention fwd+bwd at 16K tokens: 5x faster than causal SDPA
HEDGEHOG_GOAL_MS = {"fwd": 0.6, "fwd+bwd": 2.5}  # normalized (Hedgehog) form at the same shape
TRITON = dict(backend="triton")


def rand(*shape, dtype=DTYPE):
    return torch.randn(*shape, device=DEVICE).to(dtype)


def bench(fn, warmup_ms: float = 10, rep_ms: float = 40) -> float:
    """Median milliseconds; one untimed call first so compilation and autotuning stay outside."""
    fn()
    if DEVICE == "cuda":
        torch.cuda.synchronize()
        return do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def fwd_bwd(forward, inputs, grad_out):
    """A callable running forward and backward (gradients returned, not accumulated)."""
    def run():
        out = forward()
        return torch.autograd.grad(out, inputs, grad_out)
    return run


def relative_rms(ref, out):
    ref, out = ref.detach().double().cpu(), out.detach().double().cpu()
    if torch.isnan(out).any():
        return math.inf
    return ((ref - out).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30)).item()


def check_op(name, relin_fn, ref_fn, inputs):
    """relin (bf16, Triton) vs the fp32 reference on the CPU: output and every input gradient."""
    leaves = {k: x.detach().clone().requires_grad_() for k, x in inputs.items()}
    out = relin_fn(**leaves)
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, list(leaves.values()), grad_out)
    ref_leaves = {k: x.detach().float().cpu().requires_grad_() for k, x in inputs.items()}
    ref_out = ref_fn(**ref_leaves)
    ref_grads = torch.autograd.grad(ref_out, list(ref_leaves.values()), grad_out.float().cpu())
    errors = {"o": relative_rms(ref_out, out)}
    failures = [] if errors["o"] < TOLERANCE["o"] else [f"o {errors['o']:.2e}"]
    for key, ref_g, g in zip(leaves, ref_grads, grads):
        errors["d" + key] = err = relative_rms(ref_g, g)
        limit = TOLERANCE["gate_grad" if key in GATE_LIKE else "grad"]
        if not err < limit:
            failures.append(f"d{key} {err:.2e} >= {limit}")
    result = {"op": name, "passed": not failures, "errors": errors, "failures": failures}
    print(f"check {name:34s} {'ok' if not failures else 'FAILED ' + ', '.join(failures)}", flush=True)
    return result


class Run:
    """Collects timings and comparisons; one failing measurement never stops the run."""

    def __init__(self):
        self.measurements, self.comparisons, self.checks = [], [], {}

    def time(self, impl, op, mode, shape, fn_factory):
        row = {"impl": impl, "op": op, "mode": mode, "shape": shape, "ms": None, "error": None}
        try:
            row["ms"] = bench(fn_factory())
        except Exception as error:  # noqa: BLE001 - recorded, e.g. fla's Triton-version guard
            row["error"] = f"{type(error).__name__}: {str(error)[:200]}"
        if DEVICE == "cuda":
            torch.cuda.empty_cache()
        shown = f"{row['ms']:10.3f} ms" if row["ms"] is not None else "ERROR " + row["error"]
        print(f"{impl:6s} {op:30s} {mode:8s} {shape:32s} {shown}", flush=True)
        self.measurements.append(row)
        return row

    def compare(self, relin_row, baseline_name, baseline_ms, goal_ratio, check_key, goal_ms=None):
        """One comparison; the goal is a ratio to the baseline, or with ``goal_ms`` a time beside it."""
        check = self.checks.get(check_key, {"passed": False, "failures": ["not checked"]})
        ratio = None
        if relin_row["ms"] is not None and baseline_ms and check["passed"]:
            ratio = relin_row["ms"] / baseline_ms
        note = "" if check["passed"] else "check failed: " + "; ".join(check["failures"])
        if relin_row["error"]:
            note = relin_row["error"]
        if goal_ms is None:
            goal, met = f"<= {goal_ratio:.3g}x", ratio is not None and ratio <= goal_ratio
        else:
            goal, met = f"<= {goal_ms} ms", ratio is not None and relin_row["ms"] <= goal_ms
        self.comparisons.append({
            "op": relin_row["op"], "mode": relin_row["mode"], "shape": relin_row["shape"], "ms": relin_row["ms"],
            "baseline": baseline_name, "baseline_ms": baseline_ms, "ratio": ratio, "goal": goal, "met": met,
            "note": note})


def gdn_inputs(B, T, H, D):
    return dict(q=rand(B, T, H, D), k=F.normalize(rand(B, T, H, D, dtype=torch.float32), dim=-1).to(DTYPE),
                v=rand(B, T, H, D), g=F.logsigmoid(rand(B, T, H, dtype=torch.float32)),
                beta=torch.sigmoid(rand(B, T, H, dtype=torch.float32)).to(DTYPE))


def sdpa_factory(B, T, H, D, backward):
    q, k, v = (rand(B, H, T, D).requires_grad_(backward) for _ in range(3))
    forward = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
    return fwd_bwd(forward, [q, k, v], rand(B, H, T, D)) if backward else forward


def op_factory(op, inputs, backward, **kwargs):
    """fn() running ``op(**inputs, **kwargs)[0]``, with float inputs as autograd leaves when timing backward."""
    def factory():
        leaves = {k: x.detach().clone().requires_grad_(backward and x.is_floating_point()) for k, x in inputs.items()}
        forward = lambda: op(**leaves, **kwargs)[0]  # noqa: E731
        if not backward:
            return forward
        return fwd_bwd(forward, [x for x in leaves.values() if x.requires_grad], torch.randn_like(forward()))
    return factory


def bench_gated_delta_rule(run, shapes_fwd, shape_fwd_bwd, check_shape):
    B, T, H, D = check_shape
    run.checks["gdn"] = check_op(
        "chunk_gated_delta_rule", lambda **x: chunk_gated_delta_rule(**x, **TRITON)[0],
        lambda **x: naive_recurrent_gated_delta_rule(**x)[0], gdn_inputs(B, T, H, D))
    for (B, T, H, D), backward in [(s, False) for s in shapes_fwd] + [(shape_fwd_bwd, True)]:
        shape, mode = f"B={B} T={T} H={H} D={D}", "fwd+bwd" if backward else "fwd"
        inputs = gdn_inputs(B, T, H, D)
        ours = run.time("relin", "chunk_gated_delta_rule", mode, shape,
                        op_factory(chunk_gated_delta_rule, inputs, backward, **TRITON))
        theirs = run.time("fla", "chunk_gated_delta_rule", mode, shape,
                          op_factory(fla("gated_delta_rule", "chunk_gated_delta_rule"), inputs, backward))
        sdpa = run.time("torch", "sdpa causal", mode, shape, lambda: sdpa_factory(B, T, H, D, backward))
        if theirs["ms"] is not None:
            run.compare(ours, "fla chunk_gated_delta_rule", theirs["ms"], GDN_FLA_GOAL, "gdn")
        run.compare(ours, "torch sdpa causal", sdpa["ms"], GDN_SDPA_GOAL if backward else 1.0, "gdn")
        del inputs


def dla_inputs(B, T, H, K, V):
    return dict(q=rand(B, T, H, K), k=rand(B, T, H, K), v=rand(B, T, H, V),
                g=F.logsigmoid(rand(B, T, H, dtype=torch.float32)))


def hedgehog_inputs(x):
    """Hedgehog's form of ``dla_inputs``: positive (softmax) features, no decay; for ``normalize=True``."""
    return dict(q=torch.softmax(x["q"].float(), -1).to(DTYPE), k=torch.softmax(x["k"].float(), -1).to(DTYPE), v=x["v"])


def bench_decayed_linear_attn(run, shape, check_shape):
    run.checks["dla"] = check_op(
        "chunk_decayed_linear_attn", lambda **x: chunk_decayed_linear_attn(**x, **TRITON)[0],
        lambda **x: naive_recurrent_decayed_linear_attn(**x)[0], dla_inputs(*check_shape))
    run.checks["hedgehog"] = check_op(
        "chunk_decayed_linear_attn normalize", lambda **x: chunk_decayed_linear_attn(**x, normalize=True, **TRITON)[0],
        lambda **x: naive_recurrent_decayed_linear_attn(**x, normalize=True)[0],
        hedgehog_inputs(dla_inputs(*check_shape)))
    B, T, H, K, V = shape
    label, inputs = f"B={B} T={T} H={H} K={K} V={V}", dla_inputs(*shape)
    hedgehog = hedgehog_inputs(inputs)
    for backward in (False, True):
        mode = "fwd+bwd" if backward else "fwd"
        ours = run.time("relin", "chunk_decayed_linear_attn", mode, label,
                        op_factory(chunk_decayed_linear_attn, inputs, backward, **TRITON))
        theirs = run.time("fla", "chunk_simple_gla", mode, label,
                          op_factory(fla("simple_gla", "chunk_simple_gla"), inputs, backward))
        sdpa = run.time("torch", "sdpa causal", mode, f"B={B} T={T} H={H} D={V}",
                        lambda: sdpa_factory(B, T, H, V, backward))
        if theirs["ms"] is not None:
            run.compare(ours, "fla chunk_simple_gla", theirs["ms"], 1.0, "dla")
        run.compare(ours, "torch sdpa causal", sdpa["ms"], DLA_SDPA_GOAL if backward else 1.0, "dla")
        # Hedgehog's form (positive features, no decay, normalized), beside the same SDPA run
        normalized = run.time("relin", "chunk_decayed_linear_attn normalize", mode, label,
                              op_factory(chunk_decayed_linear_attn, hedgehog, backward, normalize=True, **TRITON))
        run.compare(normalized, "torch sdpa causal", sdpa["ms"], None, "hedgehog", goal_ms=HEDGEHOG_GOAL_MS[mode])


def msr_inputs(B, T, C, S):
    return dict(q=rand(B, T, C), k=(F.elu(rand(B, T, C, dtype=torch.float32)) + 1).to(DTYPE), v=rand(B, T, C),
                gate=torch.sigmoid(rand(B, T, C, dtype=torch.float32)).to(DTYPE),
                mix=torch.softmax(rand(B, T, S, dtype=torch.float32), -1).to(DTYPE))


def msr_log_decays(S):
    """λ_s log-linear in [0.70, 0.995] (LIA-MTR)."""
    return torch.linspace(math.log(0.70), math.log(0.995), S, device=DEVICE)


def msr_bytes(B, T, C, S, backward):
    """Bytes touched once: read q, k, v, gate, mix and write o; backward also reads them and do, writes grads."""
    element = torch.finfo(DTYPE).bits // 8
    forward = element * B * T * (5 * C + S)
    return forward + (element * B * T * (10 * C + 2 * S) if backward else 0)


def fla_hgrn_retention(chunk_hgrn, log_decays):
    """fla's closest equivalent: chunk_hgrn on u expanded over S ([B, T, S·C]), then the mix in torch."""
    def op(q, k, v, gate, mix):
        B, T, C = q.shape
        S = mix.shape[-1]
        u = (gate * k * v)[:, :, None, :].expand(B, T, S, C).reshape(B, T, S * C)
        g = log_decays[None, None, :, None].expand(B, T, S, C).reshape(B, T, S * C)
        states = chunk_hgrn(u, g)[0].view(B, T, S, C)
        return (q * torch.einsum("bts,btsc->btc", mix, states).to(q.dtype),)
    return op


def bench_multiscale_retention(run, shape, check_shape, copy_bandwidth):
    B, T, C, S = check_shape
    check_decays = msr_log_decays(S)
    run.checks["msr"] = check_op(
        "multiscale_diag_retention", lambda **x: multiscale_diag_retention(**x, log_decays=check_decays, **TRITON)[0],
        lambda **x: naive_multiscale_diag_retention(**x, log_decays=check_decays.cpu())[0], msr_inputs(B, T, C, S))
    B, T, C, S = shape
    label, inputs, log_decays = f"B={B} T={T} C={C} S={S}", msr_inputs(B, T, C, S), msr_log_decays(S)
    for backward in (False, True):
        mode = "fwd+bwd" if backward else "fwd"
        ours = run.time("relin", "multiscale_diag_retention", mode, label,
                        op_factory(multiscale_diag_retention, inputs, backward, log_decays=log_decays, **TRITON))
        floor_ms = msr_bytes(B, T, C, S, backward) / copy_bandwidth * 1e3
        run.compare(ours, "bytes once at copy bandwidth", floor_ms, MSR_FLOOR_GOAL, "msr")
        theirs = run.time("fla", "chunk_hgrn (S-expanded) + mix", mode, label,
                          op_factory(fla_hgrn_retention(fla("hgrn", "chunk_hgrn"), log_decays), inputs, backward))
        if theirs["ms"] is not None:
            run.compare(ours, "fla chunk_hgrn (S-expanded) + mix", theirs["ms"], 1.0, "msr")
    del inputs


def copy_bandwidth_bytes_per_s(numel):
    """Read+write bytes per second of a large device-to-device copy."""
    src, dst = rand(numel), torch.empty(numel, device=DEVICE, dtype=DTYPE)
    ms = bench(lambda: dst.copy_(src))
    bandwidth = 2 * numel * src.element_size() / (ms * 1e-3)
    print(f"copy {numel * src.element_size() / 2**30:.2f} GiB: {ms:.3f} ms, {bandwidth / 1e12:.3f} TB/s read+write",
          flush=True)
    return bandwidth, ms


def fla(module, name):
    """fla's ``fla.ops.<module>.<name>``, imported at call time: an import error is that row's recorded error."""
    def op(*args, **kwargs):
        import importlib

        return getattr(importlib.import_module(f"fla.ops.{module}"), name)(*args, **kwargs)
    return op


def print_table(comparisons):
    header = (f"{'op':28s} {'mode':8s} {'shape':30s} {'ms':>9s} {'baseline':34s} {'base ms':>9s} {'ratio':>7s} "
              f"{'goal':>8s}  met")
    print("\n" + header + "\n" + "-" * len(header))
    for c in comparisons:
        ms = f"{c['ms']:9.3f}" if c["ms"] is not None else f"{'-':>9s}"
        base = f"{c['baseline_ms']:9.3f}" if c["baseline_ms"] is not None else f"{'-':>9s}"
        ratio = f"{c['ratio']:7.2f}" if c["ratio"] is not None else f"{'-':>7s}"
        met = ("yes" if c["met"] else "no") + (f"  ({c['note'][:60]})" if c["note"] else "")
        print(f"{c['op'][:28]:28s} {c['mode']:8s} {c['shape'][:30]:30s} {ms} {c['baseline'][:34]:34s} {base} {ratio} "
              f"{c['goal']:>8s}  {met}")


def environment():
    """What the envelope does not record: where the ops ran and the fla they are compared with."""
    env = {"device": DEVICE, "triton_interpret": os.environ.get("TRITON_INTERPRET", "0")}
    try:
        import fla

        env["fla"] = getattr(fla, "__version__", "unknown")
    except Exception as error:  # noqa: BLE001
        env["fla"] = f"not importable: {type(error).__name__}: {error}"
    return env


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes: a dry run (works on a CPU under TRITON_INTERPRET=1)")
    parser.add_argument("--out", help="folder of this run's kernels.json (default $OUT, else benchmarks/results/)")
    parser.add_argument("--only", default="msr,gdn,dla",
                        help="comma-separated subset of msr (multiscale retention), gdn (gated delta rule), "
                             "dla (decayed linear attention); each under ~2 minutes on a fresh H200")
    Envelope.add_argument(parser)
    args = parser.parse_args(argv)
    ops = set(args.only.split(","))
    if not ops <= {"msr", "gdn", "dla"}:
        parser.error(f"--only takes msr, gdn, dla; got {args.only}")
    if DEVICE == "cpu" and not (args.quick and os.environ.get("TRITON_INTERPRET") == "1"):
        parser.error("without a GPU only `TRITON_INTERPRET=1 ... --quick` can run")
    if args.quick:
        gdn_fwd, gdn_fwd_bwd, gdn_check = [(1, 64, 2, 32), (2, 64, 2, 32)], (1, 128, 2, 32), (1, 64, 2, 32)
        dla, dla_check = (1, 128, 2, 64, 32), (1, 64, 2, 64, 32)
        msr, msr_check, copy_numel = (1, 256, 64, 8), (1, 100, 48, 8), 2**20
    else:
        gdn_fwd = [(1, 4096, 16, 128), (1, 16384, 16, 128), (1, 65536, 16, 128), (8, 4096, 16, 128)]
        gdn_fwd_bwd, gdn_check = (1, 65536, 16, 128), (1, 256, 4, 128)
        dla, dla_check = (1, 16384, 16, 256, 128), (1, 256, 4, 256, 128)
        msr, msr_check, copy_numel = (1, 262144, 1024, 8), (1, 1000, 256, 8), 2**30
    envelope = Envelope.start("kernel_bench", allow_dirty=args.allow_dirty)
    env = environment()
    print(env, flush=True)
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    run = Run()
    bandwidth, copy_ms = copy_bandwidth_bytes_per_s(copy_numel)
    if "msr" in ops:
        bench_multiscale_retention(run, msr, msr_check, bandwidth)
    if "gdn" in ops:
        bench_gated_delta_rule(run, gdn_fwd, gdn_fwd_bwd, gdn_check)
    if "dla" in ops:
        bench_decayed_linear_attn(run, dla, dla_check)
    result = {"env": env, "quick": args.quick, "ops": sorted(ops), "dtype": str(DTYPE),
              "copy": {"bytes_read_plus_written": 2 * copy_numel * 2, "ms": copy_ms, "bytes_per_s": bandwidth},
              "checks": run.checks, "measurements": run.measurements, "comparisons": run.comparisons}
    out_dir = Path(args.out or os.environ.get("OUT") or Path(__file__).parents[1] / "results")
    path = envelope.write(out_dir / "kernels.json", result)
    print_table(run.comparisons)
    print(f"\nwrote {path}")
    return 0 if all(c["passed"] for c in run.checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
