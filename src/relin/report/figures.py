"""The report's figures (PNG), drawn with matplotlib's object API on the Agg canvas: no display,
no pyplot global state."""
from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure

from .inputs import EvalResult, NamedRows

DPI = 120


CURVES = (("loss", "training loss", "log"), ("accuracy", "training token accuracy", "linear"),
          ("lr", "learning rate", "linear"))


def training_curves(histories: list[NamedRows], path: Path) -> Path:
    """Loss (log scale), token accuracy and learning rate against step, one line per run; a panel
    only for the columns some history has."""
    curves = [c for c in CURVES if c[0] == "loss" or any(h.rows and c[0] in h.rows[0] for h in histories)]
    fig = Figure(figsize=(4.6 * len(curves), 3.6), layout="constrained")
    for ax, (column, label, scale) in zip(fig.subplots(1, len(curves), squeeze=False).ravel(), curves):
        for i, h in enumerate(histories):
            if h.rows and column in h.rows[0]:
                ax.plot([r["step"] for r in h.rows], [r[column] for r in h.rows], label=h.name, color=f"C{i}")
        ax.set(xlabel="step", ylabel=label, yscale=scale)
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize="small")
    fig.savefig(path, dpi=DPI)
    return path


def accuracy_vs_length(evals: list[EvalResult], path: Path) -> Path:
    """Accuracy against context length, one panel per task family, one line per model."""
    families = sorted({f for e in evals for f in e.metrics["accuracy_by_length"]})
    cols = min(3, max(1, len(families)))
    rows = max(1, math.ceil(len(families) / cols))
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, family in zip(axes, families):
        lengths: set[int] = set()
        for e in evals:
            by_len = e.metrics["accuracy_by_length"].get(family, {})
            points = sorted((int(n), acc) for n, acc in by_len.items() if acc is not None)
            lengths.update(n for n, _ in points)
            ax.plot([n for n, _ in points], [a for _, a in points], marker="o", label=e.name)
        ax.set(title=family, xlabel="context length (tokens)", ylabel="accuracy", ylim=(-0.03, 1.03))
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(lengths), [str(n) for n in sorted(lengths)])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
        ax.legend(fontsize="small")
    for ax in axes[len(families):]:
        ax.set_visible(False)
    fig.savefig(path, dpi=DPI)
    return path


def niah_depth_heatmaps(by_length: list[NamedRows], path: Path) -> Path:
    """NIAH accuracy over needle depth (rows) × context length (columns): one panel per model and family."""
    panels = sorted({(b.name, r["task"]) for b in by_length for r in b.rows if str(r["task"]).startswith("niah")})
    cols = min(3, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(3.8 * cols, 3.2 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    image = None
    for ax, (name, task) in zip(axes, panels):
        cells = [r for b in by_length if b.name == name for r in b.rows if r["task"] == task]
        lengths = sorted({int(r["length"]) for r in cells})
        depths = sorted({float(r["depth"]) for r in cells})
        grid = [[math.nan] * len(lengths) for _ in depths]
        for r in cells:
            grid[depths.index(float(r["depth"]))][lengths.index(int(r["length"]))] = r["accuracy"]
        image = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
        ax.set(title=f"{name}: {task}", xlabel="context length", ylabel="needle depth")
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=list(axes[:len(panels)]), label="accuracy", shrink=0.8)
    fig.savefig(path, dpi=DPI)
    return path
