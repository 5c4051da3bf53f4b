"""Peak memory of one distillation loss + backward, chunked vocabulary against whole logits.

    python benchmarks/cpu/kd_memory.py                # T 4096, vocab 32768, hidden 256, on the CPU
    python benchmarks/cpu/kd_memory.py --device cuda  # the same on a GPU (max_memory_allocated)

Each variant runs in a fresh process (CPU: the growth of peak RSS over the inputs' footprint; GPU:
``torch.cuda.max_memory_allocated`` over it), prints a table and writes ``benchmarks/results/kd_memory.json``
(the current figures; earlier ones are in git history).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from relin.envelope import Envelope

ROOT = Path(__file__).resolve().parents[2]


def measure(kind: str, variant: str, tokens: int, vocab: int, hidden: int, chunk: int, device: str) -> dict:
    import resource

    import torch

    from relin.train.objectives import chunked_divergence, divergence_sum

    torch.manual_seed(0)
    heads = [torch.nn.Linear(hidden, vocab, bias=False).to(device) for _ in range(2)]
    h_s = torch.randn(tokens, hidden, device=device, requires_grad=True)
    h_t = torch.randn(tokens, hidden, device=device)
    targets = torch.randint(0, vocab, (tokens,), device=device)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    began = time.perf_counter()
    if variant == "whole":
        loss, _ = divergence_sum(heads[0](h_s), heads[1](h_t).detach(), targets, kind)
    else:
        loss, _ = chunked_divergence(h_s, h_t, heads[0], heads[1], targets, kind, chunk_size=chunk)
    loss.backward()
    if device == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    return {"divergence": kind, "variant": variant, "peak_mib": round(peak / 2**20, 1),
            "seconds": round(time.perf_counter() - began, 3), "loss": float(loss)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=32768)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--chunk", type=int, default=256)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--one", nargs=2, metavar=("DIVERGENCE", "VARIANT"), help=argparse.SUPPRESS)
    Envelope.add_argument(parser)
    args = parser.parse_args()
    shape = (args.tokens, args.vocab, args.hidden, args.chunk, args.device)
    if args.one:
        print(json.dumps(measure(*args.one, *shape)))
        return 0
    envelope = Envelope.start("kd_memory", allow_dirty=args.allow_dirty, root=ROOT)
    rows = []
    for kind in ("forward_kl", "reverse_kl", "reverse_kl_sampled"):
        for variant in ("whole", "chunked"):
            out = subprocess.run([sys.executable, __file__, *sum(([f"--{k}", str(v)] for k, v in zip(
                ("tokens", "vocab", "hidden", "chunk", "device"), shape)), []), "--one", kind, variant],
                capture_output=True, text=True, check=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
    logits_mib = args.tokens * args.vocab * 4 / 2**20
    print(f"T {args.tokens}, vocab {args.vocab}, hidden {args.hidden}, chunk {args.chunk}, {args.device}; "
          f"one fp32 [T, V] tensor = {logits_mib:.0f} MiB")
    print(f"{'divergence':<20}{'variant':<10}{'peak MiB':>10}{'seconds':>10}")
    for r in rows:
        print(f"{r['divergence']:<20}{r['variant']:<10}{r['peak_mib']:>10.1f}{r['seconds']:>10.3f}")
    record = {"device": args.device, "shape": dict(zip(("tokens", "vocab", "hidden", "chunk"), shape[:4])),
              "rows": rows}
    out = envelope.write(ROOT / "benchmarks" / "results" / "kd_memory.json", record)
    print(f"-> {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
