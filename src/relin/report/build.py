"""Assemble the report from stage outputs and write it atomically into one directory.

The page opens with what produced it (configs, commit) and, for a run that trained too few steps, a warning
that its verdicts are not evidence; then every claim of the three papers with its verdict, paper by paper (each
claim once: its row holds the estimate, the paper's figure and the measured preconditions); then one section per
paper with the measurements those verdicts rest on (its tables, its own models in its figures); then the shared
evaluation and training detail.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..io import atomic_dir, atomic_write_text, read_manifest
from ..manifest import paths as manifest_paths
from . import figures, tables
from .hedgemamba import HedgeMambaSettings, hedgemamba_section
from .inputs import EvalResult, NamedJson, NamedRows, read_json
from .lia_mtr import LiaSettings, lia_mtr_section
from .lm_scores import ItemScores, ModelItems, attach_chance
from .opal import OpalSettings, lm_eval_section, opal_section
from .page import FigureRef, Notice, Section, render_html, render_markdown
from .table import Table
from .verdicts import KINDS, PAPER_KINDS, Claim, tally, verdict_tables

FIGURES = "figures"
# History name prefixes -> the paper (or the spine) whose training curves they join.
GROUPS = {"teacher": "teachers", "opal": "OPAL", "hedgemamba": "HedgeMamba", "lia_mtr": "LIA-MTR"}


@dataclass
class ReportInputs:
    """Every stage output the report reads."""

    evals: list[EvalResult] = field(default_factory=list)
    items: list[ModelItems] = field(default_factory=list)
    histories: list[NamedRows] = field(default_factory=list)
    by_length: list[NamedRows] = field(default_factory=list)
    train_metrics: list[NamedJson] = field(default_factory=list)
    speed: NamedRows | None = None
    hedgemamba_init: NamedJson | None = None
    hedgemamba_decays: list[NamedJson] = field(default_factory=list)
    opal_layers: NamedJson | None = None
    lia_mtr: dict = field(default_factory=dict)
    lm_eval: list[str] = field(default_factory=list)

    def paths(self) -> list[Path]:
        single = (x for x in (self.speed, self.hedgemamba_init, self.opal_layers) if x)
        out = [x.path for x in (*self.evals, *self.items, *self.by_length, *self.histories, *self.train_metrics,
                                *self.hedgemamba_decays, *single)]
        return out + [Path(p) for p in (*manifest_paths(self.lia_mtr), *self.lm_eval)]


@dataclass(frozen=True)
class ReportSettings:
    """How the verdicts are drawn (``report`` config) and what each paper's section needs of its config."""

    title: str
    mastery: float
    resamples: int
    min_steps: int
    opal: OpalSettings
    hedgemamba: HedgeMambaSettings
    lia_mtr: LiaSettings


@dataclass(frozen=True)
class Provenance:
    """What produced the report: the config layers (params.yaml, overlays, --config), the code's commit, and the
    last commit that changed the verdict rules with its time (ISO 8601; ``+``: the rules differ from it)."""

    configs: tuple[str, ...]
    commit: str
    commit_date: str
    rules: str = "unknown"
    rules_time: str = ""


def rules_notices(provenance: Provenance, first_output: float | None) -> list[Notice]:
    """The commit of the rules the verdicts follow, and a warning when they were not committed before the run whose
    outputs they judge (uncommitted, or committed after the first of those outputs was written)."""
    from datetime import datetime

    notices = [Notice(f"Verdict rules (claims, preconditions, thresholds, margins) as of commit {provenance.rules}"
                      + (f" ({provenance.rules_time})." if provenance.rules_time else "."))]
    if provenance.rules.endswith("+"):
        notices.append(Notice("The verdict rules differ from their last commit: a rule is committed before the run "
                              "whose report uses it, so these verdicts are not final.", warning=True))
    elif provenance.rules_time and first_output is not None:
        committed = datetime.fromisoformat(provenance.rules_time).timestamp()
        if committed > first_output:
            written = datetime.fromtimestamp(first_output).astimezone().isoformat(timespec="seconds")
            notices.append(Notice(f"The verdict rules were committed after this run's stages wrote their outputs "
                                  f"(from {written}): these verdicts apply rules chosen after the run.", warning=True))
    return notices


def head_notices(provenance: Provenance, histories: list[NamedRows], min_steps: int,
                 first_output: float | None = None) -> list[Notice]:
    notices = [Notice(f"Produced by relin at commit {provenance.commit} ({provenance.commit_date}) from "
                      f"{' + '.join(provenance.configs)}."), *rules_notices(provenance, first_output)]
    steps = {h.name: int(h.rows[-1]["step"]) for h in histories if h.rows}
    short = sorted((n, name) for name, n in steps.items() if n < min_steps)
    if short:
        n, name = short[0]
        notices.append(Notice(f"Not evidence: {len(short)} training stage(s) took fewer than {min_steps} optimizer "
                              f"steps ({name}: {n}); this is a plumbing run (e.g. the smoke overlay) and its verdicts "
                              f"say nothing about the papers.", warning=True))
    return notices


def claims_overview(claims: list[Claim]) -> Section:
    """Every verdict of the three papers, paper by paper: its claims, its checks and its claims of no seed, each a
    table, under a tally of each kind over all papers."""
    line = "; ".join(f"{title.split(':')[0]}: {tally([c for c in claims if c.kind == kind])}"
                     for kind, title in KINDS.items())
    tables = [table for paper in dict.fromkeys(c.paper for c in claims)
              for table in verdict_tables([c for c in claims if c.paper == paper], paper)]
    tables[0].note = f"{line}. {tables[0].note}"
    return Section("Verdicts", tables)


def _measurements(section: Section) -> Section:
    """A paper's section without its verdict tables: they stand once, under Verdicts."""
    claim_titles = tuple(f": {title}" for title in PAPER_KINDS.values())
    return Section(section.heading, [block for block in section.blocks
                                     if not (isinstance(block, Table) and block.title.endswith(claim_titles))])


def _training_sections(histories: list[NamedRows], figure_dir: Path) -> Section | None:
    if not histories:
        return None
    blocks: list = [tables.training_table(histories)]
    for prefix, label in GROUPS.items():
        group = [h for h in histories if h.name.split("-", 1)[0] == prefix and h.rows]
        if group:
            curves = figures.training_curves(group, figure_dir / f"training_{prefix}.png")
            blocks.append(FigureRef(f"{FIGURES}/{curves.name}", f"Training ({label}): loss, token accuracy and "
                                    f"learning rate per logged step."))
    return Section("Training", blocks)


def _group(items: list[ModelItems], teacher: str, prefix: str, resamples: int) -> ItemScores | None:
    """One paper's models scored together: its teacher and its students, all on the teacher family's test split
    (each pretrained teacher has its own, rendered with its tokenizer)."""
    group = [i for i in items if i.name == teacher or i.name.startswith(prefix)]
    return ItemScores(group, resamples) if group else None


def report_sections(inputs: ReportInputs, settings: ReportSettings, figure_dir: Path
                    ) -> tuple[list[Section], list[Claim]]:
    """The sections of the report and every claim; figures are drawn into ``figure_dir``."""
    evals = {e.name: e for e in inputs.evals}
    items = attach_chance(inputs.items, inputs.evals)
    histories = {h.name: h for h in inputs.histories}
    train = {t.name: t for t in inputs.train_metrics}
    papers, claims = [], []
    layers = inputs.opal_layers.data if inputs.opal_layers else None
    opal_scores = _group(items, settings.opal.teacher, "opal-", settings.resamples)
    if (opal := opal_section(opal_scores, settings.opal, histories, train, inputs.speed, evals, figure_dir,
                             FIGURES, layers)) is not None:
        papers.append(opal[0])
        claims += opal[1]
    if (harness := lm_eval_section([read_json(p, "a results JSON of relin opal-lm-eval") for p in inputs.lm_eval])):
        papers.append(harness)
    lia = lia_mtr_section(inputs.lia_mtr, settings.lia_mtr, figure_dir, FIGURES)
    if lia is not None:
        papers.append(lia[0])
        claims += lia[1]
    decays = {d.name.removeprefix("hedgemamba-"): d.data for d in inputs.hedgemamba_decays}
    init = inputs.hedgemamba_init.data if inputs.hedgemamba_init else None
    hedgemamba_scores = _group(items, settings.hedgemamba.teacher, "hedgemamba-", settings.resamples)
    if (hedgemamba := hedgemamba_section(hedgemamba_scores, settings.hedgemamba, histories, init, evals,
                                         figure_dir, FIGURES, decays, train)) is not None:
        papers.append(hedgemamba[0])
        claims += hedgemamba[1]
    sections = ([claims_overview(claims)] if claims else []) + [_measurements(paper) for paper in papers]
    if inputs.evals:
        blocks: list = [tables.evaluation_table(inputs.evals)]
        if (by_position := tables.perplexity_by_position_table(inputs.evals)) is not None:
            blocks.append(by_position)
        blocks.append(tables.accuracy_by_length_table(inputs.evals))
        niah = [b for b in inputs.by_length if any(str(r["task"]).startswith("niah") for r in b.rows)]
        if niah:
            blocks.append(tables.niah_depth_table(niah))
        sections.append(Section("Evaluation of every model", blocks))
    if (training := _training_sections(inputs.histories, figure_dir)) is not None:
        sections.append(training)
    return sections, claims


def _source(path: Path) -> str:
    """The input path and the stage that produced it (from its manifest). Run ids stay in MLflow
    (the report run's inputs name them): the report holds only what its inputs determine."""
    producer = read_manifest(path)
    return f"{path} ({producer['stage']})" if producer.get("stage") else str(path)


def build_report(inputs: ReportInputs, settings: ReportSettings, provenance: Provenance, out: str | Path) -> Path:
    """Write ``index.html``, ``summary.md`` and ``figures/*.png`` to ``out`` (replaced in one rename)."""
    paths = inputs.paths()
    sources = [_source(p) for p in paths]
    first_output = min((p.stat().st_mtime for p in paths if p.exists()), default=None)
    head = head_notices(provenance, inputs.histories, settings.min_steps, first_output)
    with atomic_dir(out) as tmp:
        (tmp / FIGURES).mkdir()
        sections, _ = report_sections(inputs, settings, tmp / FIGURES)
        atomic_write_text(tmp / "index.html", render_html(settings.title, sections, sources, head))
        atomic_write_text(tmp / "summary.md", render_markdown(settings.title, sections, sources, head))
    return Path(out)
