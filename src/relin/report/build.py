"""Assemble the report from stage outputs and write it atomically into one directory."""
from __future__ import annotations

from pathlib import Path

from ..io import atomic_dir, atomic_write_text, read_manifest
from . import figures, tables
from .hedgemamba import hedgemamba_section
from .inputs import EvalResult, NamedRows, read_json
from .lia_mtr import lia_mtr_section
from .opal import lm_eval_section, opal_section
from .page import FigureRef, Section, render_html, render_markdown

FIGURES = "figures"


def report_sections(evals: list[EvalResult], histories: list[NamedRows], by_length: list[NamedRows],
                    figure_dir: Path, speed: NamedRows | None = None,
                    hedgemamba_init: dict | None = None, lia_mtr: list | None = None,
                    lm_eval: list[dict] | None = None) -> list[Section]:
    """The sections of the report; figures are drawn into ``figure_dir``."""
    sections = []
    if (opal := opal_section(evals, histories, speed, figure_dir, FIGURES)) is not None:
        sections.append(opal)
    if (harness := lm_eval_section(lm_eval or [])) is not None:
        sections.append(harness)
    if (lia := lia_mtr_section(lia_mtr or [], figure_dir, FIGURES)) is not None:
        sections.append(lia)
    if (hedgemamba := hedgemamba_section(evals, histories, hedgemamba_init, figure_dir, FIGURES)) is not None:
        sections.append(hedgemamba)
    if evals:
        curve = figures.accuracy_vs_length(evals, figure_dir / "accuracy_vs_length.png")
        sections.append(Section("Evaluation", [
            tables.evaluation_table(evals), tables.accuracy_by_length_table(evals),
            FigureRef(f"{FIGURES}/{curve.name}", "Accuracy against context length, per task family and model.")]))
    niah = [b for b in by_length if any(str(r["task"]).startswith("niah") for r in b.rows)]
    if niah:
        heat = figures.niah_depth_heatmaps(niah, figure_dir / "niah_depth.png")
        sections.append(Section("Needle in a haystack by depth", [
            tables.niah_depth_table(niah),
            FigureRef(f"{FIGURES}/{heat.name}", "NIAH accuracy over needle depth and context length.")]))
    if histories:
        curves = figures.training_curves(histories, figure_dir / "training_curves.png")
        sections.append(Section("Training", [
            tables.training_table(histories),
            FigureRef(f"{FIGURES}/{curves.name}", "Training loss, token accuracy and learning rate per logged step.")]))
    return sections


def _source(path: Path) -> str:
    """The input path and the stage that produced it (from its manifest). Run ids stay in MLflow
    (the report run's inputs name them): the report holds only what its inputs determine."""
    producer = read_manifest(path)
    return f"{path} ({producer['stage']})" if producer.get("stage") else str(path)


def build_report(title: str, evals: list[EvalResult], histories: list[NamedRows], by_length: list[NamedRows],
                 out: str | Path, speed: NamedRows | None = None, hedgemamba_init: dict | None = None,
                 lia_mtr: list | None = None, lm_eval: list[str] | None = None) -> Path:
    """Write ``index.html``, ``summary.md`` and ``figures/*.png`` to ``out`` (replaced in one rename)."""
    sources = [_source(x.path) for x in (*evals, *by_length, *histories, *([speed] if speed else []))]
    sources += [_source(Path(p)) for p in [*(lia_mtr or []), *(lm_eval or [])]]
    with atomic_dir(out) as tmp:
        (tmp / FIGURES).mkdir()
        harness = [read_json(p, "a results JSON of relin lm-eval") for p in lm_eval or []]
        sections = report_sections(evals, histories, by_length, tmp / FIGURES, speed, hedgemamba_init,
                                   lia_mtr=lia_mtr, lm_eval=harness)
        atomic_write_text(tmp / "index.html", render_html(title, sections, sources))
        atomic_write_text(tmp / "summary.md", render_markdown(title, sections, sources))
    return Path(out)
