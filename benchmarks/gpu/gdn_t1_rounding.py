"""Does relin's chunked gated delta rule round more than it needs to at T = 1 (issue #51, part 3)?

A fresh-seed fp64 oracle run once put one bf16 GDN forward at T = 1 (B2 H3 K16 V24) at relative RMS 8.3e-3
against a threshold of 8e-3. This draws many fresh cases of that shape (seeds batched along B, each case its
own pair of sequences, which the kernels treat independently) and reports, per case, the relative RMS of:

- ``floor``: the fp64 output rounded once to bf16 (no bf16 output can do better on average);
- ``relin``: relin's Triton forward;
- ``emulated``: an fp64 emulation of the kernels' single-chunk path with round-to-nearest bf16 at every place
  they round (W = bf16(beta gamma k), U = bf16(beta v), the entering state bf16(S0), delta = bf16(U - W S0),
  P = bf16(q . k), o = bf16(scale (gamma q S0 + P delta))); equal to relin's output up to fp32 summation
  order if those are all the roundings (``|relin - emulated|`` says so);
- ``fla``: fla 0.6.0's Triton forward on the same inputs (the reference design the kernels follow), if importable;

each against fp64 on the bf16-rounded inputs, and relin also against fp64 on the unrounded fp32 inputs (input
rounding counted as error, as an oracle comparing with unrounded inputs would). Then the same ratios at T = 64
and T = 200 for context. Writes ``gdn_t1_rounding.json`` to ``--out`` and prints a table last.

    python benchmarks/gpu/gdn_t1_rounding.py --out $OUT            # on a GPU
    TRITON_INTERPRET=1 python benchmarks/gpu/gdn_t1_rounding.py --cases 8 --long-cases 2   # CPU dry run
    # (the interpreter rounds fp32 -> bf16 toward zero, so its numbers are about three times a GPU's)
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from relin.envelope import Envelope
from relin.kernels.gated_delta_rule import chunk_gated_delta_rule

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
THRESHOLD = 8e-3
B, H, K, V = 2, 3, 16, 24


def draw(cases, T, init, generator):
    """Inputs of ``cases`` cases of [B, T, H, *] stacked along batch (fp32, unrounded) and an fp32 initial state."""
    n = cases * B
    r = lambda *s: torch.randn(*s, generator=generator, device=DEVICE)  # noqa: E731
    x = dict(q=r(n, T, H, K), k=F.normalize(r(n, T, H, K), dim=-1), v=r(n, T, H, V),
             g=F.logsigmoid(r(n, T, H)), beta=torch.sigmoid(r(n, T, H)))
    return x, (r(n, H, K, V) if init else None)


def reference(x, h0, scale):
    """fp64 token loop on the device, all cases at once."""
    q, k, v, g, beta = (x[n].double() for n in ("q", "k", "v", "g", "beta"))
    n, T = q.shape[:2]
    S = h0.double().clone() if h0 is not None else q.new_zeros(n, H, K, V)
    out = q.new_empty(n, T, H, V)
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        delta = beta[:, t, :, None] * (v[:, t] - torch.einsum("nhk,nhkv->nhv", k[:, t], S))
        S = S + k[:, t, :, :, None] * delta[:, :, None, :]
        out[:, t] = scale * torch.einsum("nhk,nhkv->nhv", q[:, t], S)
    return out


def emulate_t1(x, h0, scale):
    """The kernels' arithmetic for one token (M^{-1} = I), rounding to bf16 (nearest) where they store or feed a
    16-bit product operand; fp32 elsewhere, computed here in fp64."""
    rn = lambda y: y.float().bfloat16().double()  # noqa: E731
    f32 = lambda y: y.float().double()  # noqa: E731
    q, k, v, g, beta = (x[n][:, 0].double() for n in ("q", "k", "v", "g", "beta"))
    gamma = f32(g.exp())
    w, u = rn(k * (beta * gamma)[..., None]), rn(v * beta[..., None])
    if h0 is None:
        delta, carried = u, 0.
    else:
        S0 = rn(h0.double())
        delta = rn(u - torch.einsum("nhk,nhkv->nhv", w, S0))
        carried = f32(torch.einsum("nhk,nhkv->nhv", q, S0)) * gamma[..., None]
    P = rn((q * k).sum(-1))
    return rn(scale * (carried + P[..., None] * delta))[:, None]


def per_case_rel_rms(ref, out):
    """[cases] relative RMS of each case (B consecutive batch rows)."""
    ref, out = ref.double(), out.double()
    err = (out - ref).pow(2).reshape(-1, B * ref[0].numel()).mean(1).sqrt()
    return (err / ref.pow(2).reshape(-1, B * ref[0].numel()).mean(1).sqrt()).cpu()


def fla_forward():
    """fla's Triton chunk forward (its FlashQLA backend needs K = V = 128 and is also switched off), or the error."""
    os.environ["FLA_FLASH_QLA"] = "0"
    try:
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_gdn
        return fla_gdn, None
    except Exception as error:  # noqa: BLE001
        return None, f"{type(error).__name__}: {error}"


def summary(values):
    v = sorted(float(x) for x in values)
    q = lambda p: v[min(len(v) - 1, int(p * len(v)))]  # noqa: E731
    return {"median": q(0.5), "p99": q(0.99), "max": v[-1], "mean": sum(v) / len(v),
            "frac_above_threshold": sum(x > THRESHOLD for x in v) / len(v), "n": len(v)}


def study(T, cases, init, generator, fla_gdn):
    x, h0 = draw(cases, T, init, generator)
    scale = K ** -0.5
    xb = {n: t.to(torch.bfloat16) for n, t in x.items()}
    if DEVICE == "cpu":
        xb = {n: t.contiguous() for n, t in xb.items()}
    with torch.no_grad():
        ref = reference(xb, h0, scale)
        ref_unrounded = reference(x, h0, scale)
        o = chunk_gated_delta_rule(**xb, initial_state=h0, backend="triton")[0]
    row = {"T": T, "initial_state": init, "cases": cases,
           "floor": summary(per_case_rel_rms(ref, ref.to(torch.bfloat16))),
           "relin": summary(per_case_rel_rms(ref, o)),
           "relin_vs_unrounded_inputs": summary(per_case_rel_rms(ref_unrounded, o)),
           "floor_vs_unrounded_inputs": summary(per_case_rel_rms(ref_unrounded, ref_unrounded.to(torch.bfloat16)))}
    ratio = per_case_rel_rms(ref, o) / per_case_rel_rms(ref, ref.to(torch.bfloat16))
    row["relin_over_floor"] = summary(ratio)
    if T == 1:
        emu = emulate_t1(xb, h0, scale)
        row["emulated"] = summary(per_case_rel_rms(ref, emu))
        row["max_abs_relin_minus_emulated"] = (o.double() - emu).abs().max().item()
        row["max_abs_relin"] = o.double().abs().max().item()
        row["bitwise_equal_fraction_relin_emulated"] = (o.double() == emu).double().mean().item()
    if fla_gdn is not None:
        try:
            with torch.no_grad():
                of = fla_gdn(**xb, initial_state=h0)[0]
            row["fla"] = summary(per_case_rel_rms(ref, of))
            row["fla_over_floor"] = summary(per_case_rel_rms(ref, of) / per_case_rel_rms(ref, ref.to(torch.bfloat16)))
        except Exception as error:  # noqa: BLE001
            row["fla_error"] = f"{type(error).__name__}: {str(error)[:300]}"
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=8192, help="fresh cases at T = 1 (each B2 H3 K16 V24)")
    parser.add_argument("--long-cases", type=int, default=256, help="cases at T = 64 and T = 200")
    parser.add_argument("--seed", type=int, help="default: fresh from os.urandom, recorded")
    parser.add_argument("--out", help="folder for gdn_t1_rounding.json (default $OUT, else the current folder)")
    Envelope.add_argument(parser)
    args = parser.parse_args(argv)
    if DEVICE == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        parser.error("without a GPU run under TRITON_INTERPRET=1")
    envelope = Envelope.start("gdn_t1_rounding", allow_dirty=args.allow_dirty, packages=("fla-core",))
    seed = args.seed if args.seed is not None else int.from_bytes(os.urandom(4), "little")
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    fla_gdn, fla_error = fla_forward()
    rows = []
    for T, cases in ((1, args.cases), (64, args.long_cases), (200, args.long_cases)):
        for init in (True, False):
            rows.append(study(T, cases, init, generator, fla_gdn))
            r = rows[-1]
            print(f"T={T:4d} init={init!s:5s} floor {r['floor']['median']:.2e} relin {r['relin']['median']:.2e} "
                  f"(max {r['relin']['max']:.2e}, >{THRESHOLD:g}: {r['relin']['frac_above_threshold']:.4f})",
                  flush=True)
    env = {"device": DEVICE, "seed": seed, "triton_interpret": os.environ.get("TRITON_INTERPRET", "0"),
           "fla_import_error": fla_error}
    result = {"env": env, "shape": {"B": B, "H": H, "K": K, "V": V}, "threshold": THRESHOLD, "rows": rows}
    envelope.write(Path(args.out or os.environ.get("OUT") or ".") / "gdn_t1_rounding.json", result)
    cols = ["floor", "relin", "emulated", "fla", "relin_vs_unrounded_inputs"]
    print(f"\n{'T':>4s} {'h0':5s} " + " ".join(f"{c[:20]:>20s}" for c in cols) + "   (median / max rel. RMS)")
    for r in rows:
        cells = [f"{r[c]['median']:.2e}/{r[c]['max']:.2e}" if c in r else "-" for c in cols]
        print(f"{r['T']:4d} {r['initial_state']!s:5s} " + " ".join(f"{c:>20s}" for c in cells))
    for r in rows:
        if "max_abs_relin_minus_emulated" in r:
            print(f"T=1 h0={r['initial_state']}: max |relin - emulated| {r['max_abs_relin_minus_emulated']:.3e} "
                  f"(max |o| {r['max_abs_relin']:.2f}), bitwise equal {r['bitwise_equal_fraction_relin_emulated']:.4f}")
    return 0 if all(math.isfinite(r["relin"]["max"]) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
