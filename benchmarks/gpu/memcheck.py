"""Run every relin kernel, in every autotuning config, at small shapes of every head dim: the sweep to run under
``compute-sanitizer --tool memcheck`` (which reports out-of-bounds and misaligned accesses the tests cannot see).

    compute-sanitizer --tool memcheck --error-exitcode 1 python3 benchmarks/gpu/memcheck.py [gdn] [gdn_segments] [dla] \
        [msr] [decode] [step] [--dims 128x128,16x16]

The autotuner times each config once instead of benchmarking it (memcheck slows every launch), so each config
still runs. Shapes match tests/kernels' head-dim sweeps (two heads), so a machine that ran those has the
kernels compiled already. Prints one line per case and a count last; exits non-zero if an output is not finite.
"""
from __future__ import annotations

import argparse
import math
import os
import sys

import triton.testing


def _run_once(fn, *args, quantiles=None, **kwargs):
    fn()
    return [1.0] * len(quantiles) if quantiles else 1.0


triton.testing.do_bench = _run_once  # before relin builds its autotuners

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from relin.kernels import (  # noqa: E402
    chunk_decayed_linear_attn,
    chunk_gated_delta_rule,
    decode_attention,
    fused_recurrent_gated_delta_rule,
    gdn_gates,
    multiscale_diag_retention,
    rms_norm,
    short_conv_step,
)

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"  # a CPU runs it under TRITON_INTERPRET=1 (slowly)
DIMS = [(16, 16), (16, 256), (24, 48), (32, 100), (48, 24), (64, 32), (100, 64), (128, 128), (256, 16), (256, 256)]
H = 2


def r(*shape):
    return torch.randn(*shape, device=DEVICE)


def fwd_bwd(op, inputs, states=()):
    """Forward and backward with random cotangents; every output and gradient must be finite."""
    leaves = {name: x.detach().clone().requires_grad_(x.is_floating_point()) for name, x in inputs.items()}
    out, final = op(**leaves)
    finals = [s for s in (final if isinstance(final, tuple) else (final,)) if s is not None]
    loss = (out.float() * torch.randn_like(out, dtype=torch.float32)).sum()
    loss = loss + sum((s * torch.randn_like(s)).sum() for s in finals)
    grads = torch.autograd.grad(loss, [x for x in leaves.values() if x.requires_grad])
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return all(torch.isfinite(t).all() for t in (out, *finals, *grads))


def forward_only(op, inputs):
    """The forward without autograd (the ops' inference paths); every output must be finite."""
    with torch.no_grad():
        out, final = op(**inputs)
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return bool(torch.isfinite(out).all() and torch.isfinite(final).all())


def gdn_cases(dims):
    for K, V in dims:
        for B, T, cu in ((2, 75, None), (1, 164, torch.tensor([0, 15, 15, 100, 164], device=DEVICE))):
            N = B if cu is None else cu.numel() - 1
            x = dict(q=r(B, T, H, K), k=F.normalize(r(B, T, H, K), dim=-1), v=r(B, T, H, V),
                     g=F.logsigmoid(r(B, T, H)), beta=r(B, T, H).sigmoid())
            x = {n: t.to(torch.bfloat16) for n, t in x.items()}
            x["initial_state"] = r(N, H, K, V)
            yield f"gdn K={K} V={V} B={B} T={T} varlen={cu is not None}", lambda x=x, cu=cu: fwd_bwd(
                lambda **a: chunk_gated_delta_rule(**a, cu_seqlens=cu, output_final_state=True, backend="triton"), x)
            yield f"gdn K={K} V={V} B={B} T={T} varlen={cu is not None} no grad", lambda x=x, cu=cu: forward_only(
                lambda **a: chunk_gated_delta_rule(**a, cu_seqlens=cu, output_final_state=True, backend="triton"), x)


SEGMENT_DIMS = [(16, 16), (48, 24), (128, 128), (256, 256)]


def gdn_segment_cases(dims):
    """The gated delta rule with its serial passes on segments of one chunk (RELIN_GDN_CP=1): the carry, resolve and
    segmented state kernels, with a third of the gates zero so that some segments fall back to their transitions.
    Head dims: the four of SEGMENT_DIMS among ``dims`` (each compiles every config of four more kernels)."""
    for K, V in [d for d in dims if d in SEGMENT_DIMS]:
        for B, T, cu in ((2, 200, None), (1, 264, torch.tensor([0, 15, 15, 100, 264], device=DEVICE))):
            N = B if cu is None else cu.numel() - 1
            g = F.logsigmoid(r(B, T, H))
            x = dict(q=r(B, T, H, K), k=F.normalize(r(B, T, H, K), dim=-1), v=r(B, T, H, V),
                     g=g.masked_fill(torch.rand_like(g) < 0.3, 0), beta=r(B, T, H).sigmoid())
            x = {n: t.to(torch.bfloat16) for n, t in x.items()}
            x["initial_state"] = r(N, H, K, V)

            def op(cu=cu, **a):
                os.environ["RELIN_GDN_CP"] = "1"
                try:
                    return chunk_gated_delta_rule(**a, cu_seqlens=cu, output_final_state=True, backend="triton")
                finally:
                    os.environ.pop("RELIN_GDN_CP")
            yield f"gdn segments K={K} V={V} B={B} T={T} varlen={cu is not None}", lambda x=x, op=op: fwd_bwd(op, x)
            yield (f"gdn segments K={K} V={V} B={B} T={T} varlen={cu is not None} no grad",
                   lambda x=x, op=op: forward_only(op, x))


def dla_cases(dims):
    for K, V in dims:
        for normalize in (False, True):
            for B, T, cu, gate in ((2, 75, None, True), (1, 164, torch.tensor([0, 15, 15, 100, 164]), False)):
                N = B if cu is None else cu.numel() - 1
                q, k = r(B, T, H, K), r(B, T, H, K)
                if normalize:
                    q, k = q.softmax(-1), k.softmax(-1)
                x = dict(q=q.to(torch.bfloat16), k=k.to(torch.bfloat16), v=r(B, T, H, V).to(torch.bfloat16))
                if gate:
                    x["g"] = F.logsigmoid(r(B, T, H))
                S0 = r(N, H, K, V)
                state = (S0.abs(), torch.rand(N, H, K, device=DEVICE) + 0.5) if normalize else S0
                yield (f"dla K={K} V={V} normalize={normalize} gate={gate} B={B} T={T} varlen={cu is not None}",
                       lambda x=x, cu=cu, state=state, normalize=normalize: fwd_bwd(
                           lambda **a: chunk_decayed_linear_attn(**a, normalize=normalize, initial_state=state,
                                                                 output_final_state=True, cu_seqlens=cu,
                                                                 backend="triton"), x))


def msr_cases(dims):
    for C, S in ((16, 1), (24, 3), (100, 8), (1000, 32)):
        B, T = 2, 150
        x = dict(q=r(B, T, C), k=F.elu(r(B, T, C)) + 1, v=r(B, T, C), gate=r(B, T, C).sigmoid(),
                 mix=r(B, T, S).softmax(-1))
        x = {n: t.to(torch.bfloat16) for n, t in x.items()}
        log_decays = torch.linspace(math.log(0.7), math.log(0.995), S, device=DEVICE)
        x["initial_state"] = r(B, S, C)
        yield f"msr C={C} S={S} B={B} T={T}", lambda x=x, log_decays=log_decays: fwd_bwd(
            lambda **a: multiscale_diag_retention(**a, log_decays=log_decays, output_final_state=True, block_len=32,
                                                  backend="triton"), x)


def decode_cases(dims):
    """Decode attention at each head dim (its K), grouped heads 1 and 8, a length inside and at the end of the cache,
    with left padding."""
    for D in sorted({K for K, _ in dims}):
        for groups in (1, 8):
            for filled in (77, 300):
                q = r(3, 2 * groups, D).to(torch.bfloat16)
                k, v = (r(3, 2, 300, D).to(torch.bfloat16) for _ in range(2))
                length, start = torch.tensor(filled, device=DEVICE), torch.tensor([0, 5, 70], device=DEVICE)

                def case(q=q, k=k, v=v, length=length, start=start):
                    out = decode_attention(q, k, v, length, start, backend="triton")
                    if DEVICE == "cuda":
                        torch.cuda.synchronize()
                    return bool(torch.isfinite(out).all())
                yield f"decode D={D} G={groups} T={filled}/300", case


def step_cases(dims):
    """The decode step's one-pass kernels at each head dim: RMSNorm alone, after the add and gated over heads sliced
    from a fused projection; the short-conv step and the gates on slices of it; the recurrent step reading q, k, v
    in place from the slices."""
    def finite(*outs):
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        return all(bool(torch.isfinite(t).all()) for t in outs)

    for D in sorted({K for K, _ in dims} | {2048, 5000}):
        x, res, gate = (r(3, 2, D).to(torch.bfloat16) for _ in range(3))
        w = r(D).to(torch.bfloat16)
        yield f"rms_norm D={D}", lambda x=x, w=w, res=res, gate=gate: finite(
            rms_norm(x, w, 1e-6, backend="triton"), *rms_norm(x, w, 1e-6, residual=res, backend="triton"),
            rms_norm(x, w, 1e-6, gate=gate, backend="triton"))
    for K, _ in dims:
        B, inner = 3, H * K
        proj = r(B, 4 * inner + 2 * H).to(torch.bfloat16)
        state, weight = r(B, 3 * inner, 3).to(torch.bfloat16), r(3 * inner, 4)
        h0 = r(B, H, K, K)

        def case(proj=proj, state=state, weight=weight, h0=h0, K=K, inner=inner):
            with torch.no_grad():
                qkv = short_conv_step(proj[:, :3 * inner], state, weight, real=torch.ones(B, device=DEVICE),
                                      backend="triton")
                q, k, v = (qkv[:, i * inner:(i + 1) * inner].view(B, 1, H, K) for i in range(3))
                a, b = proj[:, 4 * inner:4 * inner + H].view(B, 1, H), proj[:, 4 * inner + H:].view(B, 1, H)
                g, beta = gdn_gates(a, b, r(H), r(H), backend="triton")
                o, _ = fused_recurrent_gated_delta_rule(q, k, v, g, beta, initial_state=h0, output_final_state=True,
                                                        use_qk_l2norm_in_kernel=True, final_state_in_place=True,
                                                        backend="triton")
                y = rms_norm(o, r(K), 1e-6, gate=proj[:, 3 * inner:4 * inner].view(B, 1, H, K), backend="triton")
            return finite(qkv, g, beta, o, h0, y, state)
        yield f"decode step K={K}", case


SWEEPS = {"gdn": gdn_cases, "gdn_segments": gdn_segment_cases, "dla": dla_cases, "msr": msr_cases,
          "decode": decode_cases, "step": step_cases}


def main(argv=None):
    """Every case, or those of the ops named on the command line (gdn, gdn_segments, dla, msr, decode, step), at
    every head dim or --dims."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ops", nargs="*", help=f"ops to run, of {', '.join(SWEEPS)} (default: all)")
    parser.add_argument("--dims", type=_dims, default=DIMS, help="K x V pairs, e.g. 128x128,16x16 (default: all)")
    args = parser.parse_args(argv)
    if not set(args.ops) <= SWEEPS.keys():
        parser.error(f"expected ops of {', '.join(SWEEPS)}; got {' '.join(args.ops)}")
    torch.manual_seed(0)
    failures, count = [], 0
    for cases in (sweep(args.dims) for op, sweep in SWEEPS.items() if op in (args.ops or SWEEPS)):
        for name, case in cases:
            finite = case()
            count += 1
            print(f"{'ok' if finite else 'NOT FINITE'} {name}", flush=True)
            if not finite:
                failures.append(name)
    print(f"memcheck sweep: {count} cases, {len(failures)} with non-finite outputs", flush=True)
    return 1 if failures else 0


def _dims(text: str) -> list[tuple[int, int]]:
    try:
        return [tuple(int(d) for d in pair.split("x", 1)) for pair in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K x V pairs such as 128x128,16x16, got {text!r}") from None


if __name__ == "__main__":
    sys.exit(main())
