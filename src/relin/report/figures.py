"""The report's figures (PNG), drawn with matplotlib's object API on the Agg canvas: no display, no pyplot
global state. Each paper's figures show that paper's models only, each model in its own colour, legends
outside the axes."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from ..eval.plots import DPI
from .inputs import EvalResult, NamedRows

if TYPE_CHECKING:
    from .lm_scores import ItemScores

CURVES = (("loss", "training loss", "log"), ("accuracy", "training token accuracy", "linear"),
          ("lr", "learning rate", "linear"))


# A figure is at most this many pixels wide (it is drawn at DPI), so the page shows it without scrolling.
MAX_WIDTH_PX = 2000


def grid(panels: int, per_row: int) -> tuple[int, int]:
    """Rows and columns for ``panels`` panels, at most ``per_row`` a row."""
    cols = min(panels, per_row)
    return math.ceil(panels / cols), cols


def title(text: str, width: int = 34) -> str:
    """A panel title wrapped to ``width`` characters, so neighbouring titles do not run into each other."""
    return textwrap.fill(text, width)


def colours(n: int) -> list:
    """``n`` distinct colours (tab10 up to ten, tab20 beyond): no colour repeats within a figure."""
    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i) for i in range(n)]


def legend_outside(fig: Figure, ax) -> None:
    """One legend for the figure, right of the axes, from ``ax``'s labelled lines."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", fontsize="small")


def training_curves(histories: list[NamedRows], path: Path) -> Path:
    """Loss (log scale), token accuracy and learning rate against step, one line per run; a panel only for the
    columns some history has."""
    curves = [c for c in CURVES if c[0] == "loss" or any(h.rows and c[0] in h.rows[0] for h in histories)]
    fig = Figure(figsize=(4.2 * len(curves) + 2.5, 3.6), layout="constrained")
    palette = colours(len(histories))
    axes = fig.subplots(1, len(curves), squeeze=False).ravel()
    for ax, (column, label, scale) in zip(axes, curves):
        for colour, h in zip(palette, histories):
            if h.rows and column in h.rows[0]:
                ax.plot([r["step"] for r in h.rows], [r[column] for r in h.rows], label=h.name, color=colour)
        ax.set(xlabel="step", ylabel=label, yscale=scale)
        ax.grid(alpha=0.3)
    legend_outside(fig, axes[0])
    fig.savefig(path, dpi=DPI)
    return path


def accuracy_by_length_figure(evals: list[EvalResult], path: Path) -> Path:
    """Accuracy against context length, one panel per task family, one line (own colour) per model."""
    families = sorted({f for e in evals for f in e.metrics["accuracy_by_length"]})
    cols = min(3, max(1, len(families)))
    rows = max(1, math.ceil(len(families) / cols))
    fig = Figure(figsize=(3.8 * cols + 2.8, 3.1 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    palette = colours(len(evals))
    for ax, family in zip(axes, families):
        lengths: set[int] = set()
        for colour, e in zip(palette, evals):
            by_len = e.metrics["accuracy_by_length"].get(family, {})
            points = sorted((int(n), acc) for n, acc in by_len.items() if acc is not None)
            lengths.update(n for n, _ in points)
            ax.plot([n for n, _ in points], [a for _, a in points], marker="o", label=e.name, color=colour)
        ax.set(title=family, xlabel="context length (tokens)", ylabel="accuracy", ylim=(-0.03, 1.03))
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(lengths), [str(n) for n in sorted(lengths)])
        ax.minorticks_off()
        ax.grid(alpha=0.3)
    for ax in axes[len(families):]:
        ax.set_visible(False)
    if families:
        legend_outside(fig, axes[0])
    fig.savefig(path, dpi=DPI)
    return path


def niah_depth_figure(scores: "ItemScores", models: list[str], path: Path, window: int | None = None) -> Path:
    """NIAH accuracy over needle depth (rows) × context length (columns): a row of panels per model, a column
    per family, from the evaluated items. With ``window``, cells whose needles lie mostly within that many
    tokens of the answer are hatched."""
    models = [m for m in models if m in scores]
    families = [f for f in scores.families() if f.startswith("niah")]
    fig = Figure(figsize=(3.4 * len(families) + 1.2, 2.8 * len(models)), layout="constrained")
    axes = fig.subplots(len(models), len(families), squeeze=False)
    image = None
    for r, model in enumerate(models):
        cols = scores.models[model].columns
        for c, family in enumerate(families):
            ax = axes[r, c]
            keep = cols["task"] == family
            lengths, depths = np.unique(cols["length"][keep]), np.unique(cols["depth"][keep])
            grid = np.full((len(depths), len(lengths)), np.nan)
            near = np.zeros_like(grid, dtype=bool)
            for i, d in enumerate(depths):
                for j, n in enumerate(lengths):
                    cell = keep & (cols["depth"] == d) & (cols["length"] == n)
                    grid[i, j] = cols["hits"][cell].sum() / max(cols["total"][cell].sum(), 1e-12)
                    near[i, j] = window is not None and np.median(cols["needle_distance"][cell]) < window
            image = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto", origin="lower")
            for i, j in zip(*np.nonzero(near)):
                ax.add_patch(_hatch(j, i))
            ax.set_xticks(range(len(lengths)), [str(int(n)) for n in lengths])
            ax.set_yticks(range(len(depths)), [f"{d:g}" for d in depths])
            ax.set(title=f"{model}: {family}", xlabel="context length", ylabel="needle depth")
    if image is not None:
        fig.colorbar(image, ax=axes.ravel().tolist(), label="accuracy", shrink=0.8)
    fig.savefig(path, dpi=DPI)
    return path


def _hatch(x: int, y: int):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, hatch="///", edgecolor="black", linewidth=0)
