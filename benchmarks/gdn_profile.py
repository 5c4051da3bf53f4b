"""Gated delta rule on one GPU: a bf16 check against the fp32 token loop, then relin vs fla forward
times at the anchor shapes, relin fwd+bwd at (1, 64K, 16, 128), and a per-kernel breakdown of it.

Usage (device machine): ``source benchmarks/device_env.sh; python benchmarks/gdn_profile.py``.
Prints a table last; ``--fla`` also times fla (its autotuning costs minutes on a fresh machine),
``--no-profile`` skips the kernel breakdown. Rows print as they are measured.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from relin.kernels.gated_delta_rule import chunk_gated_delta_rule, naive_recurrent_gated_delta_rule
from relin.kernels.gated_delta_rule.grad import gdn_bwd_kernel_grad_output, gdn_bwd_kernel_grad_wy
from relin.kernels.gated_delta_rule.state import gdn_bwd_kernel_state, gdn_fwd_kernel_state
from relin.kernels.gated_delta_rule.wy import gdn_fwd_kernel_kkt_inverse, gdn_fwd_kernel_wu

FWD_SHAPES = [(1, 4096, 16, 128), (1, 16384, 16, 128), (1, 65536, 16, 128), (8, 4096, 16, 128)]
FWD_BWD_SHAPE = (1, 65536, 16, 128)
# fla 0.6.0 forward ms at FWD_SHAPES, H200 (torch 2.11, triton 3.6), from benchmarks/kernels.py before this script.
FLA_FWD_MS = [0.454, 0.639, 2.504, 0.933]
SDPA_FWD_BWD_64K_MS = 129.3  # SDPA causal fwd+bwd at (1, 64K, 16, 128), H200, measured before this script
TOLERANCE = dict(o=0.005, dq=0.008, dk=0.008, dv=0.008, dg=0.02, dbeta=0.02)


def inputs(B, T, H, D, dtype=torch.bfloat16):
    r = lambda *s: torch.randn(*s, device="cuda")  # noqa: E731
    return dict(q=r(B, T, H, D).to(dtype), k=F.normalize(r(B, T, H, D), dim=-1).to(dtype), v=r(B, T, H, D).to(dtype),
                g=F.logsigmoid(r(B, T, H)), beta=torch.sigmoid(r(B, T, H)).to(dtype))


def fwd_bwd(op, x):
    leaves = {n: t.detach().clone().requires_grad_() for n, t in x.items()}
    o = op(**leaves)[0]
    do = torch.randn_like(o)
    names = list(leaves)

    def step():
        out = op(**leaves)[0]
        return torch.autograd.grad(out, [leaves[n] for n in names], do)
    return step


def rel(ref, out):
    ref, out = ref.double().cpu(), out.double().cpu()
    return ((out - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item()


def check(T=1000, H=16):
    """bf16 relin vs the fp32 token loop (on the CPU): relative RMS error of o and every gradient."""
    x = inputs(1, T, H, 128)
    leaves = {n: t.detach().clone().requires_grad_() for n, t in x.items()}
    o = chunk_gated_delta_rule(**leaves)[0]
    do = torch.randn_like(o, dtype=torch.float32)
    (o.float() * do).sum().backward()
    ref_leaves = {n: t.detach().cpu().float().requires_grad_() for n, t in x.items()}
    o_ref = naive_recurrent_gated_delta_rule(**ref_leaves)[0]
    (o_ref * do.cpu()).sum().backward()
    errors = {"o": rel(o_ref, o)}
    errors.update({f"d{n}": rel(ref_leaves[n].grad, leaves[n].grad) for n in x})
    return errors


def ms(fn):
    fn()
    torch.cuda.synchronize()
    return do_bench(fn, warmup=25, rep=100, return_mode="median")


def kernel_breakdown(fn):
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / 1e3, e.count) for e in prof.key_averages()]
    return sorted((r for r in rows if r[1] > 0), key=lambda r: -r[1])[:10]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fla", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    args = parser.parse_args()
    errors = check()
    failed = [n for n, e in errors.items() if e > TOLERANCE[n]]
    print("check (bf16 vs fp32 loop, T=1000):", {n: f"{e:.2e}" for n, e in errors.items()},
          "FAIL " + ",".join(failed) if failed else "ok")
    fla_op = None
    if args.fla:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_op
    rows = []
    x = inputs(*FWD_BWD_SHAPE)
    step = fwd_bwd(chunk_gated_delta_rule, x)
    del x
    ours = ms(step)
    rows.append((f"fwd+bwd {FWD_BWD_SHAPE}", ours, SDPA_FWD_BWD_64K_MS, SDPA_FWD_BWD_64K_MS / ours))
    print(*rows[-1], flush=True)
    for shape, fla_ms in zip(FWD_SHAPES, FLA_FWD_MS):
        x = inputs(*shape)
        ours = ms(lambda: chunk_gated_delta_rule(**x))
        theirs = ms(lambda: fla_op(**x)) if fla_op else fla_ms
        rows.append((f"fwd {shape}", ours, theirs, ours / theirs))
        print(*rows[-1], flush=True)
    if not args.no_profile:
        print("kernels in one fwd+bwd at", FWD_BWD_SHAPE)
        for name, total, count in kernel_breakdown(step):
            print(f"  {total:8.3f} ms  x{count:<3d} {name[:90]}")
    for name, kernel in (("fwd state", gdn_fwd_kernel_state), ("bwd state", gdn_bwd_kernel_state),
                         ("kkt_inverse", gdn_fwd_kernel_kkt_inverse), ("wu", gdn_fwd_kernel_wu),
                         ("grad output", gdn_bwd_kernel_grad_output),
                         ("grad wy", gdn_bwd_kernel_grad_wy)):
        print(f"  autotuned {name}: {getattr(kernel, 'best_config', None)}")
    print(f"{'case':34s} {'relin ms':>9s} {'base ms':>9s} {'ratio':>7s}   (fwd: relin/fla; fwd+bwd: SDPA/relin)")
    for name, a, b, r in rows:
        print(f"{name:34s} {a:9.3f} {b:9.3f} {r:7.2f}")


if __name__ == "__main__":
    main()
