"""``relin lia-mtr-bridge-memory``: each bridge's forward over N visual patches, N doubling: on the GPU when there
is one (bf16, ``max_memory_allocated`` above the inputs, an out-of-memory recorded as ``oom``), else on the
CPU (fp32, the allocator's peak during the forward from the profiler's record of every allocation); both count the
allocator's bytes (:mod:`relin.eval.bridge_memory`). ``benchmarks/gpu/bridge_memory.py`` runs the paper's sizes alone.
``memory.csv`` one row per point, ``metrics.json`` the fitted growth exponent per bridge (peak ∝ N^p) and Lemma 2's
numerical checks under each reading of the state (:mod:`relin.eval.lemma2`), ``memory.png`` peak against N."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import BridgeMemoryConfig

COLUMNS = ("bridge", "impl", "n", "status", "peak_bytes", "method")


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.memory": BridgeMemoryConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--table", required=True, help="memory.csv to write")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")
    parser.add_argument("--figure", required=True, help="figure (PNG) to write")


def run(args: argparse.Namespace, sections) -> None:

    from matplotlib.figure import Figure

    from ...devices import compute_device, device_name
    from ...eval.bridge_memory import growth_exponent, measure_cpu, measure_cuda, variants
    from ...eval.lemma2 import lemma2_checks
    from ...eval.plots import save_figure
    from ...io import atomic_write_csv, atomic_write_json
    from ...logs import progress
    from ...tracking import stage_run

    cfg = sections.get("lia_mtr.memory")
    points = [(b, impl, n) for b, impl in variants(cfg.bridges, cfg.mha_impls) for n in cfg.lengths]
    rows = []
    device = compute_device()
    with stage_run("lia-mtr-bridge-memory", sections.raw, outputs=[args.table, args.metrics]) as tracker:
        for bridge, impl, n in progress(points, desc="memory"):
            if device.type == "cuda":
                result = measure_cuda(bridge, impl, n, cfg.d_vision, cfg.d_llm, cfg.num_scales)
            else:
                result = measure_cpu(bridge, impl, n, cfg.d_vision, cfg.d_llm, cfg.num_scales, cfg.max_bytes)
            rows.append({"bridge": bridge, "impl": impl, "n": n, **result})
        # Times measure the machine: they go to MLflow, the tracked table keeps the deterministic columns.
        tracker.record({f"ms_{r['bridge']}_{r['impl']}_{r['n']}": r["ms"] for r in rows if r["ms"] is not None})
        atomic_write_csv(args.table, [{k: r[k] for k in COLUMNS} for r in rows], list(COLUMNS))
        metrics = {f"{b}{'' if impl == '-' else '_' + impl}": growth_exponent(
            [r for r in rows if r["bridge"] == b and r["impl"] == impl]) for b, impl in variants(cfg.bridges,
                                                                                                   cfg.mha_impls)}
        lemma2 = lemma2_checks()
        atomic_write_json(args.metrics, {"growth_exponent": metrics, "device": device_name(device),
                                         "lemma2": lemma2})
    fig = Figure(figsize=(5, 3.5))
    ax = fig.add_subplot()
    for b, impl in variants(cfg.bridges, cfg.mha_impls):
        pts = [(r["n"], r["peak_bytes"] / 2**20) for r in rows if r["bridge"] == b and r["impl"] == impl
               and r["status"] == "ok"]
        if pts:
            ax.plot(*zip(*pts), marker="o", label=b if impl == "-" else f"{b} ({impl})")
    ax.set(xscale="log", yscale="log", xlabel="visual patches N", ylabel="peak forward memory (MiB)",
           title=f"Bridge forward memory against N ({'GPU, bf16' if device.type == 'cuda' else 'CPU, fp32'})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    save_figure(fig, args.figure)
    print(f"lia-mtr-bridge-memory: growth exponents {metrics}")
