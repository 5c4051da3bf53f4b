"""Peak forward memory and time of the LIA-MTR bridge and its baselines against N visual tokens (LIA-MTR Table II).

One bridge maps N patch features ``[1, N, d_in]`` to ``[1, N, d_out]`` (default d_in 1024 -> d_out 2048, the
paper's CLIP-L -> 2B-LLM widths; S = 8 scales), N doubling from ``--min-n`` (1024) to ``--max-n``
(262,144); the LIA-MTR readings alone continue to ``--lia-max-n`` (1,048,576). Variants:

- ``lia_mtr``: eqs. 1-5 (:class:`relin.layers.mtr_bridge.MTRBridge`, diagonal state, token gate), on the
  fused Triton kernel ``multiscale_diag_retention`` (backend ``auto`` on CUDA tensors): the per-scale memories
  ``M_{t,s}`` [N, S, C] are never stored, so the forward holds O(N·C) activations, no N x N and no N x C x S;
- ``lia_mtr_head_matrix``: the same bridge with eq. 3's state read as a K x V matrix per head, one
  ``chunk_decayed_linear_attn`` call per scale (chunk states, no N x N);
- ``mha/naive``: softmax attention with the N x N scores formed (8 heads) -- run until it is out of memory;
  once a size is out of memory the larger ones are not tried;
- ``mha/sdpa``: ``F.scaled_dot_product_attention`` with ``is_causal`` (flash kernel: no N x N in memory);
- ``linear_attn/-``: ungated normalised linear attention on ``chunk_decayed_linear_attn``;
- ``mlp2x_gelu/-``: LLaVA's two-layer MLP projector (per token).

Per point, through :func:`relin.eval.bridge_memory.measure_cuda`: ``peak_bytes`` =
``torch.cuda.max_memory_allocated`` during one forward minus the baseline of inputs + weights
(``base_bytes``), ``peak_abs_bytes`` the absolute high-water mark, ``ms`` the median of ``--repeats``
forwards timed with CUDA events after one warm-up forward (which also compiles the Triton kernels).
Precision: bf16 weights and inputs on CUDA (``--dtype``); on ``--device cpu`` fp32 through
:func:`relin.eval.bridge_memory.measure_cpu` (the CPU allocator's peak from the profiler: a dry run at small N).

Issue 16's goals, stated beside the measurements (``goals`` in the JSON):

- LIA-MTR at N = 262,144: peak <= 3 GiB and <= 10 ms (the paper reports 11.2 GB for its bridge);
- naive MHA out of memory where the paper has it: at N = 16,384 on its 32 GB GPU; the H200's 141 GB hold
  8 heads x N² bf16 scores (plus the softmax and an N x N mask) to N = 32,768, so out of memory from 65,536;
- SDPA MHA at N = 262,144: 2.79 GiB and 621 ms (the paper's figures).

Writes ``bridge_memory.json`` (the envelope of :mod:`relin.envelope`, options, goals, rows) to ``--out`` and
prints a table last::

    python benchmarks/gpu/bridge_memory.py --out $OUT                      # H200, bf16, N 1,024 .. 1,048,576
    python benchmarks/gpu/bridge_memory.py --device cpu --max-n 4096       # a dry run here
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from relin.config.lia_mtr import BRIDGE_NAMES
from relin.envelope import Envelope
from relin.eval.bridge_memory import measure_cpu, measure_cuda, variants

GIB = 2 ** 30
GOALS = {
    "lia_mtr_262144": {"peak_gib_max": 3.0, "ms_max": 10.0, "paper_gb": 11.2},
    "mha_naive": "paper: out of memory at N = 16,384 on 32 GB; expected on 141 GB: from N = 65,536",
    "mha_sdpa_262144": {"paper_gib": 2.79, "paper_ms": 621.0},
}


def sizes(lo: int, hi: int) -> list[int]:
    """``lo, 2·lo, 4·lo, ...`` up to and including ``hi``."""
    out, n = [], lo
    while n <= hi:
        out.append(n)
        n *= 2
    return out


def on_triton(device: str) -> bool:
    """Whether the LIA-MTR forward's retention call takes the Triton path on ``device`` (backend from the env)."""
    from relin.kernels.common.backend import use_triton

    return use_triton(torch.empty(1, device=device), None)


def run(args) -> tuple[dict, list[dict]]:
    dtype = getattr(torch, args.dtype) if args.device == "cuda" else torch.float32
    rows = []
    for name, impl in variants(args.bridges, ["naive", "sdpa"]):
        top = args.lia_max_n if name.startswith("lia_mtr") else args.max_n
        for n in sizes(args.min_n, top if args.device == "cuda" else min(top, args.max_n)):
            if args.device == "cuda":
                point = measure_cuda(name, impl, n, args.d_in, args.d_out, args.num_scales, dtype=dtype,
                                     repeats=args.repeats)
            else:
                point = measure_cpu(name, impl, n, args.d_in, args.d_out, args.num_scales, args.cpu_max_bytes)
            row = {"bridge": name, "impl": impl, "n": n, **point}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if point["status"] != "ok":
                break  # a larger N needs at least as much memory
    meta = {"device": args.device, "dtype": str(dtype).replace("torch.", ""),
            "lia_mtr_triton_path": on_triton(args.device),
            "options": {"bridges": args.bridges, "d_in": args.d_in, "d_out": args.d_out, "num_scales": args.num_scales,
                        "repeats": args.repeats, "batch": 1},
            "goals": GOALS}
    return meta, rows


def table(rows: list[dict]) -> str:
    lines = [f"{'bridge':<20} {'impl':<6} {'N':>9} {'status':<7} {'peak GiB':>9} {'abs GiB':>8} {'ms':>9}"]
    for r in rows:
        def gib(key):
            return f"{r[key] / GIB:.3f}" if r.get(key) is not None else "-"
        ms = f"{r['ms']:.3f}" if r.get("ms") is not None else "-"
        lines.append(f"{r['bridge']:<20} {r['impl']:<6} {r['n']:>9} {r['status']:<7} {gib('peak_bytes'):>9} "
                     f"{gib('peak_abs_bytes'):>8} {ms:>9}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=["bfloat16", "float16", "float32"], default="bfloat16",
                        help="CUDA only (the CPU dry run is fp32)")
    parser.add_argument("--d-in", type=int, default=1024)
    parser.add_argument("--d-out", type=int, default=2048)
    parser.add_argument("--num-scales", type=int, default=8)
    parser.add_argument("--min-n", type=int, default=1024)
    parser.add_argument("--max-n", type=int, default=262_144, help="largest N of the baselines (and of the CPU)")
    parser.add_argument("--lia-max-n", type=int, default=1_048_576, help="largest N of LIA-MTR on CUDA")
    bridges = ["lia_mtr", "lia_mtr_head_matrix", "mha", "linear_attn", "mlp2x_gelu"]
    parser.add_argument("--bridges", nargs="+", default=bridges, choices=BRIDGE_NAMES,
                        help="rows of relin.config.lia_mtr.BRIDGES (default: both readings and the baselines)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cpu-max-bytes", type=int, default=2_000_000_000,
                        help="CPU: naive MHA points whose scores alone pass this are skipped")
    parser.add_argument("--out", default="benchmarks/results")
    Envelope.add_argument(parser)
    args = parser.parse_args()
    if args.device == "cuda" and not on_triton("cuda"):
        raise SystemExit("RELIN_KERNEL_BACKEND forces the PyTorch path: unset it (or set auto/triton) on CUDA")
    envelope = Envelope.start("bridge_memory", allow_dirty=args.allow_dirty)
    meta, rows = run(args)
    envelope.write(Path(args.out) / "bridge_memory.json", {**meta, "rows": rows})
    print(f"{args.device}, {meta['dtype']}, d {args.d_in} -> {args.d_out}, S {args.num_scales}, "
          f"LIA-MTR on Triton: {meta['lia_mtr_triton_path']}, commit {envelope.commit}")
    print(table(rows))


if __name__ == "__main__":
    main()
