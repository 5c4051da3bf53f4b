"""The report's HedgeMamba section (seed 001): the claims with their verdicts, the teacher, the Hedgehog model
after stage 1, the controls and HedgeMamba after stage 2 (perplexity and recovery as % of the teacher, each
with its 95% interval), every arm's budget beside the paper's, the exactness of the initialisation and the
attention-matching curves per layer.

"% of the teacher" is the papers' definition everywhere (:mod:`relin.report.lm_scores`): perplexity
teacher / student on the same passages; task recovery a ratio of averages over the families the teacher
masters.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from ..config import hedgemamba as hedgemamba_table
from ..config.hedgemamba import CHAIN, MODELS
from ..config.report import PreconditionsConfig
from ..names import chain_eval
from . import paper_figures as pf
from . import verdicts as vd
from .budgets import PaperBudget, Stated, budget_of
from .budgets import budget_table as paper_budget_table
from .figures import DPI, accuracy_by_length_figure, colours, grid, legend_outside, title
from .inputs import NamedJson, NamedRows
from .judge import Context, Measured, judge_all
from .lm_scores import ItemScores, excluded_note
from .margins import default_margins
from .page import FigureRef, Section
from .table import Table


@dataclass(frozen=True)
class HedgeMambaSettings:
    teacher: str
    mastery: float
    margins: dict[str, vd.Margin] = field(default_factory=default_margins)
    pre: PreconditionsConfig = field(default_factory=PreconditionsConfig)


def name(model: str) -> str:
    return chain_eval("hedgemamba", model)


def _tasks(scores: ItemScores) -> list[str]:
    return scores.families()


def _tokens(train: dict[str, NamedJson], model: str) -> float:
    return float(budget_of(train, name(model)).get("forward_tokens", 0))


def claims(scores: ItemScores, s: HedgeMambaSettings, init: dict[str, Any] | None,
           train: dict[str, NamedJson] | None = None) -> list[vd.Claim]:
    """HedgeMamba's verdicts: the rows of :data:`relin.config.hedgemamba.CLAIMS`, the initialisation's logit gap
    (``init``: its ``check.json``) among the figures they read."""
    figures = {}
    if init is not None:
        gap = vd.Estimate.exact(init["max_abs_logit_diff"])
        figures["init_logit_gap"] = Measured(gap, f"{gap.value:.1e}", facts={"max_logit": init["max_abs_logit"]})
    quoted = pf.HEDGEMAMBA_PERPLEXITY
    facts = {"tokens_finetune": _tokens(train or {}, "finetune"),
             "perplexity_quote": f"{pf.DERIVED['hedgemamba_perplexity']:.1f}% ({quoted.text(' vs ')}; {quoted.where})"}
    context = Context("HedgeMamba", scores, s.teacher, s.mastery, name, s.margins, s.pre, {"all": _tasks(scores)},
                      facts, figures)
    return judge_all(hedgemamba_table.CLAIMS, context)


def results_table(scores: ItemScores, s: HedgeMambaSettings) -> Table:
    tasks = _tasks(scores)
    rows, note = [], ""
    for model in [s.teacher, *(name(m) for m in MODELS)]:
        if model not in scores:
            continue
        rec = scores.recovery(model, s.teacher, tasks, s.mastery)
        note = excluded_note(rec, s.mastery)
        label = "teacher (GPT-NeoX)" if model == s.teacher else MODELS[model.removeprefix("hedgemamba-")]
        rows.append([label, scores.perplexity(model).text(".2f"),
                     scores.perplexity_share(model, s.teacher).text(".1f", unit="%"),
                     *(scores.accuracy(model, t).text(".2f") for t in tasks), rec.text()])
    quoted = pf.HEDGEMAMBA_PERPLEXITY
    rows.append(["paper: HedgeMamba from Pythia-1B [unconfirmed]", quoted.values[0],
                 f"{pf.DERIVED['hedgemamba_perplexity']:.1f}", *[None] * len(tasks), None])
    return Table(title="HedgeMamba: teacher, Hedgehog (stage 1), controls and HedgeMamba (stage 2)",
                 columns=["model", "perplexity", "perplexity % of teacher", *tasks, "recovery %"], rows=rows,
                 note=f"[95% intervals] Perplexity % = teacher / model × 100 on the same passages; task columns: "
                      f"accuracy in [0, 1]; recovery = ratio of averages over the families the teacher masters "
                      f"(≥ {s.mastery:g}); both stages draw their rows as their train.task_weights say (the default: "
                      f"the teacher's own mix, on which perplexity is scored). The paper's figure: "
                      f"{quoted.excerpt} ({quoted.where})." + note)


# Stage 1's loss variants: the rows of the chain built by hedgehog_match (the first is the configured loss).
STAGE1 = tuple(m for m, step in CHAIN.items() if step.rule == "hedgehog_match")


# The paper's budget: seed 001 states none, by stage or in all; the secondary summaries (notes/methods.md §2,
# unconfirmed) give HedgeMamba from Pythia-1B 10B tokens in all, no optimizer steps and no split by stage. Every arm
# that takes stage 2 (the controls at HedgeMamba's budget) sets its tokens in all beside them; stage 1 alone has none.
PAPER_BUDGET = PaperBudget(None, Stated(pf.HEDGEMAMBA_TOKENS, 0, "B"), "summaries (methods.md §2), in all")


def budget_table(train: dict[str, NamedJson]) -> Table | None:
    """Per trained model, the optimizer updates and tokens it took, by stage: the arms' budgets side by side, beside
    the paper's (:data:`PAPER_BUDGET`)."""
    rows = []
    for model, step in CHAIN.items():
        own = budget_of(train, name(model))
        if not own:
            continue
        if model in STAGE1:  # stage 1 alone: φ-only updates, no all-parameter one
            own, stage1 = {"optimizer_steps": 0, "forward_tokens": 0}, own
        else:
            first = [m for m in (step.start, CHAIN[step.start].start if step.start in CHAIN else "") if m in STAGE1]
            stage1 = budget_of(train, name(first[0])) if first else {}
        total = own.get("forward_tokens", 0) + stage1.get("forward_tokens", 0)
        rows.append(([MODELS.get(model, model), stage1.get("optimizer_steps"), stage1.get("forward_tokens"),
                      own.get("optimizer_steps"), own.get("forward_tokens"), total],
                     PaperBudget() if model in STAGE1 else PAPER_BUDGET, None, total))
    return paper_budget_table(
        "HedgeMamba: every arm's budget (first seed)",
        ["model", "stage-1 updates (φ only)", "stage-1 tokens", "all-parameter updates", "tokens", "tokens in all"],
        rows, note="Updates and tokens each stage took (train_metrics.json). The controls built from the teacher "
                   "make as many all-parameter updates as HedgeMamba and read its stage-1 and stage-2 rows in them "
                   "(arm_budget), so their tokens in all match HedgeMamba's in expectation (rows match exactly; a "
                   "row's length varies). The paper's: seed 001 states no budget; the secondary summaries give "
                   "HedgeMamba 10B tokens in all [unconfirmed], no steps and no split by stage, set beside every arm "
                   "that takes stage 2.")


def stage1_table(scores: ItemScores, s: HedgeMambaSettings) -> Table | None:
    """Stage 1's losses side by side: perplexity share and task recovery of each Hedgehog model."""
    shown = [m for m in STAGE1 if name(m) in scores]
    if len(shown) < 2:
        return None
    tasks = _tasks(scores)
    rows = [[MODELS[m], scores.perplexity_share(name(m), s.teacher).text(".1f", unit="%"),
             scores.recovery(name(m), s.teacher, tasks, s.mastery).text()] for m in shown]
    best = max(shown, key=lambda m: scores.perplexity_share(name(m), s.teacher).value)
    return Table(title="HedgeMamba stage 1: which matching loss wins",
                 columns=["stage-1 loss", "perplexity % of teacher", "recovery %"], rows=rows,
                 note=f"[95% intervals] Each Hedgehog model after stage 1 alone. Highest perplexity share: "
                      f"{MODELS[best]}; where the intervals overlap the data cannot rank them.")


def half_life_figure(decays: dict[str, dict], path: Path) -> Path:
    """Per model, the half-life (tokens, at the input-independent Δ) of every layer's heads before and after
    stage 2: the exact init starts at ~1e8 tokens (Λ = I); a decay that trains comes down."""
    models = [m for m in decays if decays[m]["init"]]
    rows, cols = grid(len(models), 3)
    fig = Figure(figsize=(4.2 * cols + 2.5, 3.6 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for unused in axes[len(models):]:
        unused.set_axis_off()
    for ax, model in zip(axes, models):
        for colour, (when, label) in zip(colours(2), (("init", "init"), ("trained", "after stage 2"))):
            for layer in decays[model][when]:
                heads = range(len(layer["half_life"]))
                ax.scatter([layer["layer"] + 0.08 * (h - len(heads) / 2) for h in heads], layer["half_life"],
                           color=colour, s=14, label=label if layer["layer"] == 0 else None)
        ax.set(yscale="log", xlabel="layer", ylabel="half-life (tokens)", title=title(MODELS.get(model, model)))
        ax.grid(alpha=0.3)
    legend_outside(fig, axes[0])
    fig.savefig(path, dpi=DPI)
    return path


def half_life_table(decays: dict[str, dict]) -> Table:
    rows = []
    for model, record in decays.items():
        for before, after in zip(record["init"], record["trained"]):
            rows.append([MODELS.get(model, model), before["layer"], min(before["half_life"]),
                         max(before["half_life"]), min(after["half_life"]), max(after["half_life"])])
    return Table(title="HedgeMamba: Λ's half-lives per layer before and after stage 2",
                 columns=["model", "layer", "init min", "init max", "trained min", "trained max"], rows=rows,
                 formats={c: ".3g" for c in ("init min", "init max", "trained min", "trained max")},
                 note="Half-life ln 2 / (exp(A_log) · softplus(dt_bias)) in tokens over the layer's heads, at the "
                      "input-independent Δ, against the evaluated lengths (held-out files to data.text.test_len "
                      "tokens): a half-life far above them is a layer that does not forget at any evaluated length. "
                      "Λ and Δ train in the one AdamW with every other parameter (the seed's), but in the "
                      "decay-group variant (their own lr × hedgemamba.finetune.decay_lr_scale, eps 1e-20).")


def matching_curves(history: NamedRows, path: Path) -> Path:
    """Stage 1 per layer: the matching loss and KL(A‖Â) of the attention rows against step."""
    fig = Figure(figsize=(11, 3.6), layout="constrained")
    ax_loss, ax_kl = fig.subplots(1, 2)
    steps = [r["step"] for r in history.rows]
    layers = sorted({k.split("/", 1)[1] for k in history.rows[0] if k.startswith("attn_kl/")},
                    key=lambda layer: int(layer.removeprefix("layer")))
    for colour, layer in zip(colours(len(layers)), layers):
        ax_loss.plot(steps, [r.get(f"match_loss/{layer}") for r in history.rows], color=colour, label=layer)
        ax_kl.plot(steps, [r.get(f"attn_kl/{layer}") for r in history.rows], color=colour, label=layer)
    ax_loss.set(xlabel="step", ylabel="matching loss per position", title="stage 1 loss by layer")
    ax_kl.set(xlabel="step", ylabel="KL(teacher rows ‖ Hedgehog rows)", yscale="log", title="attention-row KL")
    for ax in (ax_loss, ax_kl):
        ax.grid(alpha=0.3)
    legend_outside(fig, ax_loss)
    fig.savefig(path, dpi=DPI)
    return path


def matching_table(history: NamedRows) -> Table:
    first, last = history.rows[0], history.rows[-1]
    layers = sorted({k.split("/", 1)[1] for k in last if k.startswith("attn_kl/")},
                    key=lambda layer: int(layer.removeprefix("layer")))
    rows = [[layer, first.get(f"match_loss/{layer}"), last.get(f"match_loss/{layer}"), first.get(f"attn_kl/{layer}"),
             last.get(f"attn_kl/{layer}")] for layer in layers]
    return Table(title="Stage 1: attention matching per layer (first and last logged step)",
                 columns=["layer", "loss first", "loss last", "KL first", "KL last"], rows=rows,
                 note=f"Steps {first['step']} and {last['step']}; KL(A‖Â) per query, mean over heads, on the teacher's "
                      f"layer inputs.")


def hedgemamba_section(scores: ItemScores | None, s: HedgeMambaSettings, histories: dict[str, NamedRows],
                       init: dict[str, Any] | None, evals: dict, figure_dir: Path, prefix: str,
                       decays: dict[str, dict] | None = None, train: dict[str, NamedJson] | None = None
                       ) -> tuple[Section, list[vd.Claim]] | None:
    if scores is None or s.teacher not in scores or not any(name(m) in scores for m in MODELS):
        return None
    found = claims(scores, s, init, train)
    blocks: list = [*vd.verdict_tables(found, "HedgeMamba"), results_table(scores, s)]
    blocks += [t for t in (budget_table(train or {}), stage1_table(scores, s)) if t is not None]
    shown = [s.teacher, *(name(m) for m in MODELS)]
    fig = accuracy_by_length_figure([evals[m] for m in shown if m in evals], figure_dir / "hedgemamba_by_length.png")
    blocks.append(FigureRef(f"{prefix}/{fig.name}", "HedgeMamba: accuracy against context length per task family "
                            "(the teacher, stage 1, the controls and stage 2)."))
    if decays:
        blocks.append(half_life_table(decays))
        fig = half_life_figure(decays, figure_dir / "hedgemamba_half_lives.png")
        blocks.append(FigureRef(f"{prefix}/{fig.name}", "HedgeMamba: Λ's half-life per layer and head at "
                                "initialisation and after stage 2 (log scale)."))
    hedgehog = histories.get(name("hedgehog"))
    if hedgehog is not None and hedgehog.rows:
        blocks.append(matching_table(hedgehog))
        curves = matching_curves(hedgehog, figure_dir / "hedgemamba_matching.png")
        blocks.append(FigureRef(f"{prefix}/{curves.name}", "HedgeMamba stage 1: the matching loss and the KL between "
                                "the teacher's and the Hedgehog attention rows, per layer and logged step."))
    return Section("HedgeMamba: attention -> Hedgehog -> Mamba (seed 001)", blocks), found
