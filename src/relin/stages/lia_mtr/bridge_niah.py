"""``relin lia-mtr-bridge-niah --bridge NAME``: the bridge-isolated NIAH of Fig. 2 for one bridge
(:mod:`relin.eval.bridge_niah`): trained through the one training loop on ``train_lengths`` at random depths
(the model, ``history.csv`` and ``train_metrics.json`` as every training stage writes them, resumable), then
scored on the ``lengths`` x ``depths`` grid: ``niah.csv`` (length, depth, accuracy, n), ``items.csv`` (every
test sequence's outcome), ``metrics.json`` (mean accuracy, per length, the worst cell, chance) and
``niah.png`` (the heatmap). ``metrics.json`` also holds, per length, the norm of the state the bridge holds after
the last position (``state``: Theorem 2, :mod:`relin.eval.bridge_state`) and, for the LIA-MTR family, what its
fixed decays allow at each cell (:mod:`relin.eval.retention_limit`)."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import BridgeConfig, BridgeNIAHConfig
from .._training import Setup, add_output_arguments, run_training

# The test sequences, the same for every bridge and training seed, so their scores pair item by item.
TEST_SEED = 0
# Sequences per length whose final state the Theorem 2 probe measures (needle at depth 0.5).
STATE_EXAMPLES = 8


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.niah": BridgeNIAHConfig, "lia_mtr.bridge": BridgeConfig, "lia_mtr.kernel_backend": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ...config.lia_mtr import BRIDGE_NAMES

    parser.add_argument("--bridge", required=True, choices=BRIDGE_NAMES, help="the bridge tested")
    parser.add_argument("--table", required=True, help="niah.csv to write")
    parser.add_argument("--items", required=True, help="items.csv to write (every test sequence's outcome)")
    parser.add_argument("--scores", required=True, help="metrics JSON of the grid to write")
    parser.add_argument("--figure", required=True, help="heatmap (PNG) to write")
    add_output_arguments(parser)


def heatmap(rows: list[dict], title: str):
    from matplotlib.figure import Figure

    lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
    # a profile length scores only the first and last depth: the cells between are blank
    grid = [[next((r["accuracy"] for r in rows if r["length"] == n and r["depth"] == d), float("nan"))
             for n in lengths] for d in depths]
    fig = Figure(figsize=(4, 3))
    ax = fig.add_subplot()
    image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
    ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
    ax.set_yticks(range(len(depths)), [f"{d:.2f}" for d in depths])
    ax.set(xlabel="sequence length", ylabel="needle depth", title=title)
    for i, row in enumerate(grid):
        for j, value in enumerate(row):
            if value == value:
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="w" if value < 0.6 else "k")
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    return fig


def final_state_norms(model, cfg) -> dict:
    """Per evaluated length, the norm of the state the trained bridge holds after the last position
    (:func:`relin.eval.bridge_state.state_norms`; Theorem 2), over ``STATE_EXAMPLES`` test sequences."""
    import numpy as np
    import torch

    from ...devices import model_device
    from ...eval.bridge_niah import niah_batch
    from ...eval.bridge_state import state_norms

    out = {}
    device = model_device(model)
    with torch.no_grad():
        for length in cfg.lengths:
            pairs, _ = niah_batch(np.random.default_rng([TEST_SEED, 3, length]), cfg, STATE_EXAMPLES, length, 0.5)
            pairs = pairs.to(device)
            found = state_norms(model.bridge, model.keys(pairs[..., 0]) + model.values(pairs[..., 1]))
            if found is None:
                return {}
            out[str(length)] = found
    return out


def run(args: argparse.Namespace, sections) -> None:
    import torch

    from ...eval.bridge_niah import NIAHBatches, NIAHProbe, evaluate_grid
    from ...eval.plots import save_figure
    from ...eval.retention_limit import retention_grid
    from ...io import atomic_write_csv, atomic_write_json
    from ...train.objectives import ReadoutCrossEntropy
    from ._vlm import flush_denormals

    flush_denormals()
    cfg, bridge_cfg = sections.get("lia_mtr.niah"), sections.get("lia_mtr.bridge")
    scores: dict = {}

    def setup(env):
        torch.manual_seed(cfg.train.seed)
        model = NIAHProbe(args.bridge, cfg, bridge_cfg, sections.get("lia_mtr.kernel_backend"))
        return Setup(model, None, ReadoutCrossEntropy(), NIAHBatches(cfg, cfg.train.seed))

    def finish(model, tracker):
        rows, items = evaluate_grid(model, cfg, TEST_SEED)
        atomic_write_csv(args.table, rows, ["length", "depth", "accuracy", "n"])
        atomic_write_csv(args.items, items, ["length", "depth", "correct"])
        by_length = {str(n): round(sum(r["accuracy"] for r in rows if r["length"] == n)
                                   / sum(r["length"] == n for r in rows), 4)
                     for n in dict.fromkeys(r["length"] for r in rows)}
        scores.update({"bridge": args.bridge, "mean_accuracy": round(sum(r["accuracy"] for r in rows) / len(rows), 4),
                       "by_length": by_length, "min_accuracy": min(r["accuracy"] for r in rows),
                       "chance": round(1 / cfg.num_values, 6), "trained_lengths": sorted(cfg.train_lengths)})
        scores["state"] = final_state_norms(getattr(model, "module", model), cfg)
        decays = getattr(getattr(model, "module", model).bridge.mixer, "log_decays", None)
        if decays is not None:  # the MTR family: what its fixed decays allow at each cell (eqs. 3-5)
            slowest = float(decays.double().exp().max())
            scores["retention"] = {"slowest_decay": slowest,
                                   "cells": retention_grid(slowest, list(cfg.lengths), list(cfg.depths))}
        atomic_write_json(args.scores, scores)
        tracker.log_metrics({"mean_accuracy": scores["mean_accuracy"], "min_accuracy": scores["min_accuracy"]})
        save_figure(heatmap(rows, f"bridge NIAH: {args.bridge}"), args.figure)

    run_training("lia-mtr-bridge-niah", __name__, args, sections, cfg.train, setup, inputs=[],
                 tags={"bridge": args.bridge}, finish=finish, outputs=[args.table, args.items, args.scores])
    print(f"lia-mtr-bridge-niah {args.bridge}: mean {scores['mean_accuracy']}, by length {scores['by_length']}")
