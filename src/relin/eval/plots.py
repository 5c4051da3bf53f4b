"""Figures written by evaluation stages (matplotlib's object API, Agg canvas), atomically."""
from __future__ import annotations

import os
from pathlib import Path

DPI = 120


def save_figure(fig, path: str | Path) -> Path:
    """``fig`` as a PNG at ``path``, through a temporary file in the same directory and one rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.png")
    fig.savefig(tmp, dpi=DPI)
    os.replace(tmp, path)
    return path
