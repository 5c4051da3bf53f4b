"""``relin bridge-niah --bridge NAME``: the bridge-isolated NIAH of Fig. 2 for one bridge
(:mod:`relin.eval.bridge_niah`): trained on ``train_lengths`` at random depths, scored on the
``lengths`` x ``depths`` grid. Writes ``niah.csv`` (length, depth, accuracy, n), ``items.csv`` (every test
sequence's outcome), ``history.csv``, ``metrics.json`` (mean accuracy, per length, the worst cell, chance)
and ``niah.png`` (the heatmap)."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import BridgeConfig, BridgeNIAHConfig


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.niah": BridgeNIAHConfig, "lia_mtr.bridge": BridgeConfig, "lia_mtr.kernel_backend": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bridge", required=True, help="bridge name")
    parser.add_argument("--table", required=True, help="niah.csv to write")
    parser.add_argument("--items", required=True, help="items.csv to write (every test sequence's outcome)")
    parser.add_argument("--history", required=True, help="history.csv to write")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")
    parser.add_argument("--figure", required=True, help="heatmap (PNG) to write")


def heatmap(rows: list[dict], title: str):
    from matplotlib.figure import Figure

    lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
    grid = [[next(r["accuracy"] for r in rows if r["length"] == n and r["depth"] == d) for n in lengths]
            for d in depths]
    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set_yticks(range(len(depths)), [f"{d:.2f}" for d in depths])
    ax.set(xlabel="sequence length", ylabel="needle depth", title=title)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7, color="w" if value < 0.6 else "k")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def run(args: argparse.Namespace, sections) -> None:
    import torch

    from ...devices import compute_device
    from ...eval.bridge_niah import NIAHProbe, evaluate_grid, train_probe
    from ...eval.plots import save_figure
    from ...io import atomic_write_csv, atomic_write_json
    from ...tracking import stage_run
    from .._training import use_thread_budget
    from ._vlm import flush_denormals

    use_thread_budget()
    flush_denormals()
    cfg, bridge_cfg = sections.get("lia_mtr.niah"), sections.get("lia_mtr.bridge")
    with stage_run("bridge-niah", sections.raw, outputs=[args.table, args.items, args.metrics]) as tracker:
        tracker.set_tags({"bridge": args.bridge})
        torch.manual_seed(cfg.train.seed)
        model = NIAHProbe(args.bridge, cfg, bridge_cfg, sections.get("lia_mtr.kernel_backend")).to(compute_device())
        history = train_probe(model, cfg, cfg.train.seed)
        rows, items = evaluate_grid(model, cfg, cfg.train.seed)
        atomic_write_csv(args.table, rows, ["length", "depth", "accuracy", "n"])
        atomic_write_csv(args.items, items, ["length", "depth", "correct"])
        atomic_write_csv(args.history, history, ["step", "loss", "accuracy"])
        by_length = {str(n): round(sum(r["accuracy"] for r in rows if r["length"] == n) / len(cfg.depths), 4)
                     for n in cfg.lengths}
        metrics = {"bridge": args.bridge, "mean_accuracy": round(sum(r["accuracy"] for r in rows) / len(rows), 4),
                   "by_length": by_length, "min_accuracy": min(r["accuracy"] for r in rows),
                   "final_train_loss": history[-1]["loss"], "chance": round(1 / cfg.num_values, 6)}
        atomic_write_json(args.metrics, metrics)
        tracker.log_metrics({"mean_accuracy": metrics["mean_accuracy"], "min_accuracy": metrics["min_accuracy"]})
    save_figure(heatmap(rows, f"bridge NIAH: {args.bridge}"), args.figure)
    print(f"bridge-niah {args.bridge}: mean {metrics['mean_accuracy']}, by length {by_length}")
