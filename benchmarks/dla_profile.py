"""Decayed linear attention on a GPU: each precision/tiling variant of ``triton_fwd``'s policy checked
against the fp32 reference, then every kernel and the whole op timed at (B, T, H, K, V) = (1, 16K, 16,
256, 128) with bf16 inputs, next to SDPA causal fwd+bwd at D = 128. Prints a table last.

    python benchmarks/dla_profile.py [--variants 2,1,3]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from triton.testing import do_bench

from relin.kernels.common.backend import backend
from relin.kernels.decayed_linear_attn import chunk_decayed_linear_attn, naive_recurrent_decayed_linear_attn
from relin.kernels.decayed_linear_attn import triton_bwd, triton_fwd
from relin.kernels.decayed_linear_attn.chunk_index import build_chunk_index

VARIANTS = [
    ("bf16 states, tf32 operands", dict(LOW_STATES=True, LOW_OPERANDS=False, SAVE_STATES=False)),
    ("bf16 states and operands", dict(LOW_STATES=True, LOW_OPERANDS=True, SAVE_STATES=False)),
    ("bf16 states and operands, h saved", dict(LOW_STATES=True, LOW_OPERANDS=True, SAVE_STATES=True)),
    ("bf16, state tile 32", dict(LOW_STATES=True, LOW_OPERANDS=True, SAVE_STATES=True, STATE_TILE=32)),
    ("fp32 states, tf32 operands", dict(LOW_STATES=False, LOW_OPERANDS=False, SAVE_STATES=False)),
]
LIMITS = dict(o=0.005, state=0.005, dq=0.008, dk=0.008, dv=0.008, dh0=0.008, dg=0.02)


def inputs(B, T, H, K, V, dtype=torch.bfloat16):
    return dict(q=torch.randn(B, T, H, K, device="cuda").to(dtype), k=torch.randn(B, T, H, K, device="cuda").to(dtype),
                v=torch.randn(B, T, H, V, device="cuda").to(dtype),
                g=F.logsigmoid(torch.randn(B, T, H, device="cuda")))


def rel_rms(ref, out):
    ref, out = ref.double(), out.double()
    return ((ref - out).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30)).item()


def check(B=1, T=300, H=16, K=256, V=128):
    """Relative RMS of o, final state and all gradients against the fp32 per-token reference."""
    x = inputs(B, T, H, K, V)
    x["initial_state"] = torch.randn(B, H, K, V, device="cuda")
    do, dstate = torch.randn(B, T, H, V, device="cuda"), torch.randn(B, H, K, V, device="cuda")
    results = []
    for fn, cast in ((naive_recurrent_decayed_linear_attn, torch.float32), (chunk_decayed_linear_attn, None)):
        leaves = {n: (t.float() if cast else t).clone().requires_grad_() for n, t in x.items()}
        o, state = fn(**leaves, output_final_state=True)
        ((o.float() * do).sum() + (state * dstate).sum()).backward()
        results.append(dict(o=o.float(), state=state, **{"d" + n: t.grad for n, t in leaves.items()}))
    ref, out = results
    ref["dh0"], out["dh0"] = ref.pop("dinitial_state"), out.pop("dinitial_state")
    return {n: rel_rms(ref[n], out[n]) for n in ref}


def first_token_dg(B=8, H=16, K=256, V=128):
    """max |dg| at T = 1 without an initial state (exactly 0) over Σ|S_T ⊙ dS_T| (the cancelled size)."""
    x = {n: t.requires_grad_() for n, t in inputs(B, 1, H, K, V).items()}
    o, state = chunk_decayed_linear_attn(**x, output_final_state=True)
    dstate = torch.randn_like(state)
    ((o.float() * torch.randn_like(o.float())).sum() + (state * dstate).sum()).backward()
    return (x["g"].grad[:, 0].abs() / (state * dstate).abs().sum((-2, -1))).max().item()


def time_kernels(B, T, H, K, V):
    ms = lambda fn: do_bench(fn, warmup=5, rep=30, return_mode="median")  # noqa: E731
    x = inputs(B, T, H, K, V)
    q, k, v, g = x["q"], x["k"], x["v"], x["g"]
    do = torch.randn_like(v)
    index = build_chunk_index(B, T, None, triton_fwd.CHUNK_SIZE, q.device)
    h, _, gc = triton_fwd.chunk_fwd_h(k, v, g, None, False, index)
    dh, _ = triton_bwd.chunk_bwd_dh(q, do, gc, None, False, K ** -0.5, index)
    times = {
        "fwd_h": ms(lambda: triton_fwd.chunk_fwd_h(k, v, g, None, False, index)),
        "fwd_o": ms(lambda: triton_fwd.chunk_fwd_o(q, k, v, gc, h, K ** -0.5, index, q.dtype)),
        "bwd_dh": ms(lambda: triton_bwd.chunk_bwd_dh(q, do, gc, None, False, K ** -0.5, index)),
        "bwd_dv": ms(lambda: triton_bwd.chunk_bwd_dv(q, k, do, gc, dh, K ** -0.5, index)),
        "bwd_dqk": ms(lambda: triton_bwd.chunk_bwd_dqk(q, k, v, do, gc, h, dh, K ** -0.5, index)),
    }
    leaves = {n: t.clone().requires_grad_() for n, t in x.items()}
    times["op fwd"] = ms(lambda: chunk_decayed_linear_attn(**x))
    times["op fwd+bwd"] = ms(lambda: torch.autograd.grad(chunk_decayed_linear_attn(**leaves)[0], list(leaves.values()), do))
    return times


def sdpa_fwd_bwd(B, T, H, D):
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    fn = lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=True), [q, k, v], do)  # noqa: E731
    return do_bench(fn, warmup=5, rep=30, return_mode="median")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="2,1,3", help="indices into VARIANTS")
    chosen = [VARIANTS[int(i)] for i in parser.parse_args().variants.split(",")]
    rows = []
    with backend("triton"):
        for name, policy in chosen:
            for attr, value in (dict(STATE_TILE=64, KEY_TILE=64, VALUE_TILE=128) | policy).items():
                setattr(triton_fwd, attr, value)
            errors = check()
            passed = all(errors[n] < LIMITS[n] for n in errors)
            row = dict(name=name, errors=errors, passed=passed, dg_first=first_token_dg(),
                       times=time_kernels(1, 16384, 16, 256, 128))
            print(row, flush=True)
            rows.append(row)
    sdpa = sdpa_fwd_bwd(1, 16384, 16, 128)
    print(f"\nsdpa causal fwd+bwd (1,16K,16,128): {sdpa:.3f} ms; goal fwd+bwd <= {sdpa / 5:.3f} ms")
    kernels = list(rows[0]["times"])
    print(f"{'variant':34s} {'check':5s} {'worst err':>22s} {'dg@T=1':>8s} " + " ".join(f"{k:>10s}" for k in kernels))
    for r in rows:
        worst = max(r["errors"], key=lambda n: r["errors"][n] / LIMITS[n])
        print(f"{r['name']:34s} {'ok' if r['passed'] else 'FAIL':5s} {worst + ' ' + format(r['errors'][worst], '.2e'):>22s} "
              f"{r['dg_first']:8.1e} " + " ".join(f"{r['times'][k]:10.3f}" for k in kernels))


if __name__ == "__main__":
    main()
