"""The committed copy of a report: ``results/report`` as the report stage wrote it, into ``docs/results/<config>/``.

``relin publish-report --to docs/results/default`` copies the page (``index.html``), its Markdown twin
(``summary.md``) and its figures, replacing the ones there, and leaves what a person wrote beside them (``README.md``,
screenshots) alone; a report directory that lacks one of them is refused in one line, so a copy never has the
Markdown without the page it mirrors.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import InputError

PAGES = ("index.html", "summary.md")
FIGURES = "figures"


def publish(report: str | Path, to: str | Path) -> list[str]:
    """Copy ``report``'s pages and figures into ``to`` (created if needed); returns the names written."""
    report, to = Path(report), Path(to)
    missing = [name for name in (*PAGES, FIGURES) if not (report / name).exists()]
    if missing:
        raise InputError(f"{report}: no {', '.join(missing)} (expected a report the report stage wrote: "
                         f"snakemake --cores 2 first)")
    to.mkdir(parents=True, exist_ok=True)
    staging = to / f".{FIGURES}.new"
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(report / FIGURES, staging)
    shutil.rmtree(to / FIGURES, ignore_errors=True)
    staging.rename(to / FIGURES)
    for name in PAGES:
        shutil.copyfile(report / name, to / name)
    return [*PAGES, *sorted(f"{FIGURES}/{p.name}" for p in (to / FIGURES).iterdir())]
