"""The report's OPAL section (seed 002): the claims with their verdicts, the Table 4 analogue (NIAH and
reasoning recovery of every model), every trained model's budget beside the paper's for its stage, SWA inside
and outside its window, the Table 3 analogue with the three budgets side by side on the families stage 3 prompts
(each arm's distance from its parent, stage 2B), stage 3's rollouts (horizon, lengths, the log-prob gap between
sampling and training paths), the row lengths stages 2A and 2B drew, the stage-3 curves, and decode
memory/throughput.

Recovery is OPAL's Table 1 definition, a ratio of averages over the families the teacher masters
(:mod:`relin.report.lm_scores`); every number a verdict uses carries its 95% interval.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib.figure import Figure

from ..config import opal as opal_table
from ..config.opal import CHAIN, CONTROLS, MODELS, NIAH_TASKS, PARENT, TRAINED, kl_guided_layers
from ..config.report import PreconditionsConfig
from ..eval.tasks import TASKS as SCORING
from ..names import REPLICA_NAME, chain_eval
from . import paper_figures as pf
from . import verdicts as vd
from .budgets import PaperBudget, Stated, budget_of
from .budgets import budget_table as paper_budget_table
from .figures import DPI, accuracy_by_length_figure, niah_depth_figure
from .inputs import NamedJson, NamedRows
from .judge import Context, Measured, judge_all
from .lm_scores import ItemScores, excluded_note
from .margins import default_margins
from .page import FigureRef, Section
from .table import Table

# The families scored by exact match of a long generated answer (the walks; the lists copied or reversed): Table 3's,
# where a student's errors compound over its own generation.
EXACT_TASKS = tuple(task for task, scoring in SCORING.items() if scoring.kind == "exact")
# Every family the students are scored on: MQAR (recall, the teacher's strongest), the needles, arithmetic (the
# reasoning family, as the paper's math), the walks and lists (long generated answers).
TASKS = ("mqar", *NIAH_TASKS, "arithmetic", *EXACT_TASKS)
# Paper, Table 4 (Qwen3-4B, NIAH at 32K, %): teacher, SWA(256, 4), GDN after 2B on-policy tokens.
PAPER_TABLE4 = {"teacher": pf.OPAL_TABLE4_TEACHER, "swa": pf.OPAL_TABLE4_SWA, "gdn": pf.OPAL_TABLE4_GDN}
PAPER_NIAH = ("niah_single", "niah_multikey", "niah_multiquery")
SWA_LAYOUTS = {"all": "SWA: every layer SWA({window}, sinks), the paper's baseline",
               "hybrid": "SWA: the hybrid layout (the GDN hybrid's kept layers full attention, the rest SWA({window}, "
                         "sinks)), not the paper's baseline"}
# Paper, Table 3 (MATH-500 at 400M tokens, %): on-policy and each off-policy control.
PAPER_TABLE3 = {"onpolicy": pf.OPAL_TABLE3_ONPOLICY, "offpolicy_matched": pf.OPAL_TABLE3_DATASET,
                "offpolicy_teacher": pf.OPAL_TABLE3_TEACHER}
# The paper's budget for each trained model's stage, Qwen3-4B's: Table 6 for stages 1, 2A, 2B and 3 (stage 1's also for
# the kl_guided selection control, no arm of the paper's, trained at stage 1's budget); Table 3's matched 400M tokens
# for its two controls, whose optimizer steps it does not state. Stage 3's tokens are rollout tokens (Table 7:
# generated tokens per step), the positions the teacher scores, and Table 3's controls match them: those compare with
# our teacher-scored tokens; stages 1-2B's (tokens per batch x steps) with the tokens the student read.
_STAGE1_BUDGET = PaperBudget(Stated(pf.OPAL_TABLE6_STEPS, 0, "K"), Stated(pf.OPAL_TABLE6_TOKENS, 0, "M"),
                             "Table 6, stage 1")
_TABLE3_BUDGET = PaperBudget(None, Stated(pf.OPAL_TABLE3_TOKENS, 0, "M"), "Table 3", "target_tokens")
PAPER_BUDGET = {"align": _STAGE1_BUDGET, "align_kl_guided": _STAGE1_BUDGET,
                "offpolicy_short": PaperBudget(Stated(pf.OPAL_TABLE6_STEPS, 1), Stated(pf.OPAL_TABLE6_TOKENS, 1, "M"),
                                               "Table 6, stage 2A"),
                "offpolicy_long": PaperBudget(Stated(pf.OPAL_TABLE6_STEPS, 2), Stated(pf.OPAL_TABLE6_TOKENS, 2, "M"),
                                              "Table 6, stage 2B"),
                "onpolicy": PaperBudget(Stated(pf.OPAL_TABLE6_STEPS, 3, "K"), Stated(pf.OPAL_TABLE6_TOKENS, 3, "B"),
                                        "Table 6, stage 3", "target_tokens"),
                "offpolicy_matched": _TABLE3_BUDGET, "offpolicy_teacher": _TABLE3_BUDGET}
# The stages whose drawn row lengths the report shows (2A short, 2B long).
LENGTH_STAGES = ("offpolicy_short", "offpolicy_long")


@dataclass(frozen=True)
class OpalSettings:
    """What the OPAL section needs of the config: the teacher's eval name, SWA's window and layout, the NIAH
    protocol, the NIAH families the teacher's own mix trains on, the mastery threshold, the families stage 3 prompts,
    the claims' margins and the preconditions' thresholds."""

    teacher: str
    swa_window: int
    niah_protocol: str
    mastery: float
    swa_layout: str = "all"
    # The NIAH families the teacher's training mix draws rows of. The paper's teacher meets NIAH zero-shot (from
    # general pretraining): against a teacher trained on a family the students never saw, only a win can be read.
    teacher_trained: tuple[str, ...] = ()
    prompt_tasks: tuple[str, ...] = ("arithmetic",)
    margins: dict[str, vd.Margin] = field(default_factory=default_margins)
    pre: PreconditionsConfig = field(default_factory=PreconditionsConfig)


def name(model: str) -> str:
    return chain_eval("opal", model)


def _outside(distance: float):
    """Items whose nearest queried needle ends at least ``distance`` tokens before the answer."""
    return lambda columns: columns["needle_distance"] >= distance


def swa_reach(s: OpalSettings, layers: dict | None) -> float | None:
    """How far back SWA can carry a needle: its window times the layers it stacks when every layer is SWA (each
    layer reads ``window`` tokens of the one below); unbounded (``inf``) when the hybrid layout keeps full attention
    layers; ``None`` without the layer record that counts the layers."""
    if s.swa_layout != "all":
        return math.inf
    return None if layers is None else float(s.swa_window * len(layers["conversion_kl"]))


def trained_families(scores: ItemScores, s: OpalSettings) -> list[str]:
    """The families the distillation stages train on: every scored family but NIAH under the zero-shot protocol."""
    return [f for f in scores.families() if not (s.niah_protocol == "zero_shot" and f in NIAH_TASKS)]


def unseen_niah(scores: ItemScores, s: OpalSettings) -> list[str]:
    """The NIAH families scored that no distillation stage trains on (the paper's students meet NIAH zero-shot)."""
    trained = set(trained_families(scores, s))
    return [f for f in NIAH_TASKS if f not in trained and scores.count(f)]


def claims(scores: ItemScores, s: OpalSettings, speed: NamedRows | None,
           histories: dict[str, NamedRows] | None = None,
           train: dict[str, NamedJson] | None = None, layers: dict | None = None) -> list[vd.Claim]:
    """OPAL's verdicts: the rows of :data:`relin.config.opal.CLAIMS`."""
    return judge_all(opal_table.CLAIMS, context(scores, s, histories or {}, train or {}, layers, speed))


def cache_share(speed: NamedRows | None) -> dict[str, Measured]:
    """The hybrid's decode cache as a share of the teacher's at the longest context both were measured at (exact: the
    bytes the caches hold), as the figure ``cache_share``; none without both."""
    if speed is None:
        return {}
    longest = max(r["context"] for r in speed.rows)
    at = {r["model"]: r for r in speed.rows if r["context"] == longest}
    if not {"teacher", "hybrid"} <= set(at):
        return {}
    share = vd.Estimate.exact(100 * at["hybrid"]["cache_bytes"] / at["teacher"]["cache_bytes"])
    return {"cache_share": Measured(share, share.text(".0f", unit="%"), facts={"longest": longest})}


def context(scores: ItemScores, s: OpalSettings, histories: dict[str, NamedRows], train: dict[str, NamedJson],
            layers: dict | None, speed: NamedRows | None = None) -> Context:
    """What OPAL's claim rows read beyond the scores: the families Table 3 and Table 4 read, the horizon stage 3
    reached, the quoted Table 3 and 4 figures, the attention layers the hybrid keeps and the layers each selection
    keeps (with the conversion's layer record), SWA's stacked reach and the needles beyond it, and the decode cache's
    share."""
    reach = swa_reach(s, layers)
    kept = sorted(layers["kept"]) if layers is not None else None
    facts = {"horizon": horizon_reached(histories, train), "learned": s.pre.learned,
             "teacher_trained": s.teacher_trained, "reach": math.inf if reach is None else reach,
             "reach_text": "no layer record" if reach is None else "unbounded: full attention layers kept"
             if reach == math.inf else f"{s.swa_window} x {len(layers['conversion_kl'])} = {reach:g} tokens",
             "kept_count": 0 if kept is None else len(kept),
             "kept_shown": "no layer record" if kept is None
             else f"{kept} of {len(layers['conversion_kl'])} ({layers['selection']})",
             "table4_gdn": f"{pf.DERIVED['opal_gdn_niah']:.1f}% (Table 4, 32K: GDN {pf.OPAL_TABLE4_GDN.text()} vs "
                           f"teacher {pf.OPAL_TABLE4_TEACHER.text()})",
             "table4_swa": f"{pf.DERIVED['opal_swa_niah']:.1f}% (Table 4, 32K: SWA({pf.OPAL_SWA_WINDOW.text(', ')}) "
                           f"{pf.OPAL_TABLE4_SWA.text()} vs teacher {pf.OPAL_TABLE4_TEACHER.text()})",
             **{f"paper_{arm}": quote.text() for arm, quote in PAPER_TABLE3.items()},
             **{f"where_{arm}": quote.where.split(", ")[1] for arm, quote in PAPER_TABLE3.items()}}
    if layers is not None:
        facts.update(selection=layers["selection"], kept_layers=sorted(layers["kept"]),
                     kl_layers=kl_guided_layers(layers["conversion_kl"], len(layers["kept"])))
    families = {"table3": table3_families(scores, s), "tasks": TASKS, "all": scores.families(), "niah": NIAH_TASKS,
                "niah_unseen": unseen_niah(scores, s), "trained": trained_families(scores, s)}
    return Context("OPAL", scores, s.teacher, s.mastery, name, s.margins, s.pre, families, facts, cache_share(speed),
                   {"beyond_reach": _outside(math.inf if reach is None else reach)})


def horizon_reached(histories: dict[str, NamedRows], train: dict[str, NamedJson] | None = None,
                    model: str | None = None) -> float:
    """The longest horizon stage 3 rolled out to: exact from its budget's per-step horizons (``train_metrics.json``),
    else the largest logged one (an interval's mean)."""
    model = model or name("onpolicy")
    horizons = budget_of(train or {}, model).get("horizons")
    if horizons:
        return float(max(horizons))
    rows = histories.get(model)
    return max((float(r["horizon"]) for r in rows.rows if r.get("horizon") == r.get("horizon")), default=0.0) \
        if rows is not None else 0.0


def table3_families(scores: ItemScores, s: OpalSettings) -> list[str]:
    """The families Table 3 is read on: those stage 3 prompts that the students are scored on and train on."""
    return [f for f in s.prompt_tasks if f in trained_families(scores, s)]


def table4(scores: ItemScores, s: OpalSettings, names: list[str]) -> Table:
    rows = []
    note = ""
    tasks = [t for t in TASKS if t in NIAH_TASKS or scores.count(t)]
    for model in [s.teacher, *names]:
        rec = scores.recovery(model, s.teacher, tasks, s.mastery)
        note = excluded_note(rec, s.mastery)
        rows.append([model, *(scores.accuracy(model, t).text(".2f") for t in tasks),
                     scores.perplexity(model).text(".2f"), rec.text()])
    paper = [[f"paper: Qwen3-4B {k}", *(dict(zip(PAPER_NIAH, v.values))[t] if t in PAPER_NIAH else None
                                         for t in tasks), None, None] for k, v in PAPER_TABLE4.items()]
    protocol = ("NIAH zero-shot: no NIAH row or prompt in any distillation stage (the paper's protocol)"
                if s.niah_protocol == "zero_shot" else
                "NIAH in-distribution: the distillation stages trained on NIAH rows (not the paper's protocol)")
    return Table(title="OPAL Table 4 analogue: the teacher, SWA and the GDN hybrid after each stage",
                 columns=["model", *tasks, "perplexity", "recovery %"], rows=rows + paper,
                 note=f"Ours: accuracy in [0, 1] over the evaluated lengths [95% interval]; recovery = ratio of "
                      f"averages over the families the teacher masters (≥ {s.mastery:g}), as the paper's Table 1. "
                      f"{protocol}. {SWA_LAYOUTS[s.swa_layout].format(window=s.swa_window)}. Paper rows: NIAH at "
                      f"32K in %." + note)


def budget_table(train: dict[str, NamedJson]) -> Table | None:
    """Every trained OPAL model's budget (its first seed's) beside the paper's for its stage (:data:`PAPER_BUDGET`)."""
    rows = []
    for model in TRAINED:
        if own := budget_of(train, name(model)):
            paper = PAPER_BUDGET[model]
            rows.append(([CHAIN[model].label, own.get("optimizer_steps"), own.get("forward_tokens"),
                          own.get("target_tokens")], paper, own.get("optimizer_steps"), own.get(paper.counts)))
    return paper_budget_table(
        "OPAL: every trained model's budget (first seed)",
        ["model", "optimizer steps", "student forward tokens", "teacher-scored tokens"], rows,
        note="Ours counted exactly by the training loop (train_metrics.json): forward tokens are those the student "
             "read (prompts included); teacher-scored tokens the positions the loss compares with the teacher (stage "
             "1: per aligned layer; stage 3: the rollouts). The paper's: Qwen3-4B's, Table 6 per stage; Table 3's "
             "matched 400M for its controls (Table 3 reads the on-policy run and both controls at 400M tokens; Table "
             "6's 2B are the whole stage 3, the Table 4 model's); the kl_guided selection control is no arm of the "
             "paper's and is set beside stage 1. Tokens ours / paper's compares the tokens the paper counts: the "
             "generated (teacher-scored) ones for stage 3 and Table 3's controls (Table 7: generated tokens per "
             "step), those read for stages 1 to 2B.")


def window_table(scores: ItemScores, s: OpalSettings, layers: dict | None) -> Table:
    """NIAH accuracy of the teacher, SWA and stage 3 with the needle within vs beyond SWA's stacked reach."""
    reach = swa_reach(s, layers)
    limit = reach if reach is not None else math.inf
    within, beyond = (lambda c: (c["needle_distance"] >= 0) & (c["needle_distance"] < limit)), _outside(limit)
    rows = []
    for model in (s.teacher, name("swa"), name("onpolicy")):
        if model not in scores:
            continue
        for label, where in (("within reach", within), ("beyond reach", beyond)):
            rows.append([model, label, *(scores.accuracy(model, f, where).text(".2f") if scores.count(f, where)
                                         else None for f in NIAH_TASKS)])
    counts = ", ".join(f"{f} {scores.count(f, within)}/{scores.count(f, beyond)}" for f in NIAH_TASKS)
    reach_text = "unknown (no layer record)" if reach is None else f"{reach:g} tokens"
    return Table(title=f"NIAH with the needle within vs beyond SWA's reach ({reach_text})",
                 columns=["model", "needle", *NIAH_TASKS], rows=rows,
                 note=f"SWA({s.swa_window}) on every layer carries a token at most one window further per layer: its "
                      f"reach is the window times the layers. A needle is beyond it when its end lies at least that "
                      f"many tokens before the answer; the SWA claim reads those items only. Items within/beyond: "
                      f"{counts}.")


def table3(scores: ItemScores, s: OpalSettings, train: dict[str, NamedJson],
           histories: dict[str, NamedRows] | None = None) -> Table | None:
    """The three arms at their budgets, with their common parent (2B): exact match on each family stage 3 prompts,
    recovery over them and each arm's distance from the parent in points of recovery (the "moved" precondition)."""
    names = [m for m in ("onpolicy", *CONTROLS) if name(m) in scores and name(m) in train]
    if len(names) < 2:
        return None
    families = table3_families(scores, s)
    parent = scores.recovery(name(PARENT), s.teacher, families, s.mastery) if name(PARENT) in scores else None
    rows = []
    for model in ([PARENT] if parent is not None else []) + names:
        budget = budget_of(train, name(model))
        rec = scores.recovery(name(model), s.teacher, families, s.mastery)
        moved = (None if model == PARENT or parent is None or parent.estimate is None or rec.estimate is None
                 else (rec.estimate - parent.estimate).text("+.1f"))
        label = f"{MODELS[model]} (the arms' parent)" if model == PARENT else MODELS[model]
        rows.append([label, budget.get("optimizer_steps"), budget.get("forward_tokens"), budget.get("target_tokens"),
                     *(scores.accuracy(name(model), f).text(".2f") for f in families), rec.text(), moved,
                     continuation_kl(train, scores, name(model), families)])
    seeds = {m: len(scores.replicas.get(name(m), [name(m)])) for m in names}
    horizon = horizon_reached(histories or {}, train)
    return Table(title="OPAL Table 3 analogue: on-policy vs off-policy at a matched budget",
                 columns=["model", "optimizer steps", "student forward tokens", "teacher-scored tokens",
                          *(f"{f} exact" for f in families), "recovery %", "Δ from 2B (points)",
                          "KL on the teacher's continuations"], rows=rows, formats={
                              "KL on the teacher's continuations": ".3g"},
                 note=f"All three continue from stage 2B, each with {', '.join(f'{m} {n}' for m, n in seeds.items())} "
                      f"seed(s): accuracy, recovery and Δ are means over the seeds [95% interval]; budgets (the first "
                      f"seed's) counted exactly by the training loop (forward tokens include prompts; teacher-scored "
                      f"tokens are the positions the loss compares with the teacher). Families: those stage 3 prompts "
                      f"({', '.join(families) or 'none scored'}), scored by greedy generation, an answer right only "
                      f"when every token is; beside it the per-token KL(teacher ‖ student) on the teacher's greedy "
                      f"continuations of the held-out prompts (mean over the seeds). Stage 3's horizon reached "
                      f"{horizon:g} tokens. Paper (MATH-500, 400M "
                      f"tokens): on-policy {PAPER_TABLE3['onpolicy'].text()}, off-policy on dataset traces "
                      f"{PAPER_TABLE3['offpolicy_matched'].text()}, on the teacher's traces "
                      f"{PAPER_TABLE3['offpolicy_teacher'].text()}.")


def continuation_kl(train: dict[str, NamedJson], scores: ItemScores, model: str, families) -> float | None:
    """Per-token KL(teacher ‖ model) on the teacher's continuations of the held-out prompts of ``families`` (the
    ``teacher_continuation_kl`` of each seed's ``train_metrics.json``), averaged over families and seeds."""
    values = []
    for run in scores.replicas.get(model, [model]):
        kl = train[run].data.get("teacher_continuation_kl", {}) if run in train else {}
        if found := [kl[f] for f in families if f in kl]:
            values.append(sum(found) / len(found))
    return sum(values) / len(values) if values else None


def _finite(rows: list[dict], key: str) -> list[float]:
    return [r[key] for r in rows if isinstance(r.get(key), (int, float)) and r[key] == r[key]]


def rollouts_table(histories: dict[str, NamedRows], train: dict[str, NamedJson]) -> Table | None:
    """Stage 3's rollouts per seed: the horizon reached, how long the rollouts were, and the log-prob gap between
    the sampling path (recurrent decode) and the training forward (chunk kernel) over them."""
    base = name("onpolicy")
    runs = [n for n in histories if (n == base or ((m := REPLICA_NAME.match(n)) and m["base"] == base))
            and histories[n].rows]
    if not runs:
        return None
    rows = []
    for run in runs:
        logged = histories[run].rows
        horizons = budget_of(train, run).get("horizons", [])
        top = horizon_reached(histories, train, run)
        at_top = sum(1 for h in horizons if h >= top) if horizons else None
        means, longest = _finite(logged, "rollout_len_mean"), _finite(logged, "rollout_len_max")
        gap, peak, seq = (_finite(logged, k) for k in ("logprob_gap_mean", "logprob_gap_max", "logprob_gap_seq_max"))
        rows.append([run, top, at_top, sum(means) / len(means) if means else None, max(longest) if longest else None,
                     sum(gap) / len(gap) if gap else None, max(peak) if peak else None, max(seq) if seq else None])
    return Table(title="OPAL stage 3: rollouts and the sampling/training log-prob gap",
                 columns=["model", "horizon reached", "steps at it", "rollout tokens (mean)", "longest rollout",
                          "|Δ log p| per token (mean)", "|Δ log p| per token (max)", "per rollout |Σ Δ log p| (max)"],
                 rows=rows, formats={"horizon reached": ".0f", "rollout tokens (mean)": ".1f", "longest rollout": ".0f",
                                     **{c: ".2g" for c in ("|Δ log p| per token (mean)", "|Δ log p| per token (max)",
                                                           "per rollout |Σ Δ log p| (max)")}},
                 note="A rollout ends at eos or at the horizon. Δ log p: the log-prob the sampler drew each token with "
                      "(the recurrent decode step) against the training forward's (the chunk kernel) on the same "
                      "tokens, read over every rollout the run trained on (history.csv's logprob_gap_* columns).")


def row_lengths_table(train: dict[str, NamedJson]) -> Table | None:
    """Stages 2A and 2B: how many rows (and tokens) of each length, by power-of-two bin, each drew over its run."""
    found = {m: budget_of(train, name(m)).get("row_lengths") for m in LENGTH_STAGES}
    found = {m: h for m, h in found.items() if h}
    if not found:
        return None
    bins = sorted({b for h in found.values() for b in h}, key=lambda b: int(b.split("-")[0]))
    rows = []
    for model, histogram in found.items():
        total = sum(c["rows"] for c in histogram.values())
        tokens = sum(c["tokens"] for c in histogram.values())
        rows.append([MODELS[model], total, *(f"{histogram[b]['rows']} ({100 * histogram[b]['tokens'] / tokens:.0f}%)"
                                             if b in histogram else None for b in bins)])
    return Table(title="OPAL stages 2A and 2B: the lengths of the rows each drew",
                 columns=["stage", "rows", *(f"{b} tokens" for b in bins)], rows=rows,
                 note="Rows drawn over the whole run by length (bos and eos included), in power-of-two bins; in "
                      "brackets each bin's share of the tokens. 2A runs under a length curriculum, 2B on every row.")


def layers_table(record: dict) -> Table:
    """Which teacher layers stay attention, and what converting each one alone costs."""
    from ..config.opal import kl_guided_layers

    kept, scores = set(record["kept"]), record["conversion_kl"]
    by_kl = set(kl_guided_layers(scores, len(kept)))
    rows = [[i, score, "attention" if i in kept else "GDN", "attention" if i in by_kl else "GDN"]
            for i, score in enumerate(scores)]
    return Table(title=f"OPAL: the layers kept as attention ({record['selection']})",
                 columns=["layer", "KL of converting it alone", "in the hybrid", "kl_guided keeps"], rows=rows,
                 formats={"KL of converting it alone": ".3g"},
                 note="Per-token KL(teacher ‖ teacher with that layer alone turned to Gated DeltaNet, untrained) on "
                      "training rows; kl_guided keeps the layers with the largest, as many as every_n keeps "
                      "(opal.layer_selection); opal-align_kl_guided is stage 1 of that choice at stage 1's budget.")


def onpolicy_curves(history: NamedRows, path: Path) -> Path:
    """Stage 3: horizon and per-token reverse KL against step, and the KL by position at the end."""
    fig = Figure(figsize=(13.5, 3.6), layout="constrained")
    ax_kl, ax_h, ax_pos = fig.subplots(1, 3)
    steps = [r["step"] for r in history.rows]
    ax_kl.plot(steps, [r.get("kl") for r in history.rows], color="C0")
    ax_kl.set(xlabel="step", ylabel="reverse KL per token", yscale="log", title="stage 3 KL")
    ax_h.step(steps, [r.get("horizon") for r in history.rows], where="post", color="C1")
    ax_h.set(xlabel="step", ylabel="rollout horizon (tokens)", title="horizon curriculum")
    positions = [k for k in history.rows[-1] if k.startswith("kl_at_position/")]
    for i, row in enumerate((history.rows[0], history.rows[-1])):
        ax_pos.plot([k.split("/", 1)[1] for k in positions], [row.get(k) for k in positions], marker="o",
                    color=f"C{i + 2}", label=f"step {row['step']}")
    ax_pos.set(xlabel="tokens after the prompt", ylabel="reverse KL", title="KL by position")
    ax_pos.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.02, 1))
    for ax in (ax_kl, ax_h, ax_pos):
        ax.grid(alpha=0.3)
    fig.savefig(path, dpi=DPI)
    return path


def logprob_gap_note(history: NamedRows) -> str:
    """One sentence on the log-prob gap between stage 3's sampling path (recurrent decode) and its training forward
    (chunk kernel) over the run's rollouts, from the history's ``logprob_gap_*`` columns; empty without them."""
    def finite(key):
        return [r[key] for r in history.rows if isinstance(r.get(key), (int, float)) and r[key] == r[key]]

    means, peaks, seqs = finite("logprob_gap_mean"), finite("logprob_gap_max"), finite("logprob_gap_seq_max")
    if not means or not peaks:
        return ""
    seq = f", per rollout |Σ Δ log p| ≤ {max(seqs):.2g}" if seqs else ""
    return (f" Sampling (recurrent) vs training (chunk) path on the rollouts: |Δ log p| per token mean "
            f"{sum(means) / len(means):.2g}, max {max(peaks):.2g}{seq}.")


def speed_figure(speed: NamedRows, path: Path) -> Path:
    fig = Figure(figsize=(5.5, 3.6), layout="constrained")
    ax = fig.subplots()
    for i, model in enumerate(("teacher", "hybrid")):
        rows = sorted((r for r in speed.rows if r["model"] == model), key=lambda r: r["context"])
        ax.plot([r["context"] for r in rows], [r["cache_bytes"] / 2**20 for r in rows], marker="o", label=model,
                color=f"C{i}")
    ax.set(xlabel="context (tokens)", ylabel="cache (MiB)", title="decode memory: KV + states")
    ax.set_xscale("log", base=2)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=DPI)
    return path


def speed_table(speed: NamedRows) -> Table:
    contexts = sorted({r["context"] for r in speed.rows})
    at = {(r["model"], r["context"]): r for r in speed.rows}
    rows = []
    for c in contexts:
        t, h = at.get(("teacher", c)), at.get(("hybrid", c))
        if t and h:
            rows.append([c, t["cache_bytes"] / 2**20, h["cache_bytes"] / 2**20, h["cache_bytes"] / t["cache_bytes"]])
    return Table(title="Decode memory, hybrid vs teacher (paper Fig. 4)",
                 columns=["context", "teacher MiB", "hybrid MiB", "memory ratio"], rows=rows,
                 note="Cache after the prefill (attention KV; GDN conv and recurrent states). Decode throughput "
                      "measures the machine: this run's is in the opal-hybrid-speed MLflow run; the H200's, against "
                      "the teacher at its best and each model's bandwidth floor, in "
                      "benchmarks/results/hybrid_decode_graphed.json.")


def opal_section(scores: ItemScores | None, s: OpalSettings, histories: dict[str, NamedRows],
                 train: dict[str, NamedJson], speed: NamedRows | None, evals: dict, figure_dir: Path,
                 prefix: str, layers: dict | None = None) -> tuple[Section, list[vd.Claim]] | None:
    names = [name(m) for m in MODELS if scores is not None and name(m) in scores]
    if scores is None or s.teacher not in scores or not names:
        return None
    found = claims(scores, s, speed, histories, train, layers)
    budget = budget_table(train)
    blocks: list = [*vd.verdict_tables(found, "OPAL"), table4(scores, s, names), *([budget] if budget else []),
                    *([layers_table(layers)] if layers else []), window_table(scores, s, layers)]
    for extra in (table3(scores, s, train, histories), rollouts_table(histories, train), row_lengths_table(train)):
        if extra is not None:
            blocks.append(extra)
    shown = [s.teacher, *(name(m) for m in ("swa", "gdn", "onpolicy", *CONTROLS) if name(m) in scores)]
    lengths = accuracy_by_length_figure([evals[m] for m in shown if m in evals], figure_dir / "opal_by_length.png")
    blocks.append(FigureRef(f"{prefix}/{lengths.name}", "OPAL: accuracy against context length per task family "
                            "(the teacher, SWA, the hybrid as converted, after stage 3, and the Table 3 controls)."))
    reach = swa_reach(s, layers)
    depth = niah_depth_figure(scores, [s.teacher, name("swa"), name("onpolicy")], figure_dir / "opal_niah_depth.png",
                              window=int(reach) if reach not in (None, math.inf) else None)
    blocks.append(FigureRef(f"{prefix}/{depth.name}", "OPAL: NIAH accuracy by needle depth and context length" + (
        f"; cells where the needle lies within SWA's reach ({reach:g} tokens) are hatched."
        if reach not in (None, math.inf) else ".")))
    if name("onpolicy") in histories and histories[name("onpolicy")].rows:
        curves = onpolicy_curves(histories[name("onpolicy")], figure_dir / "opal_onpolicy.png")
        blocks.append(FigureRef(f"{prefix}/{curves.name}", "OPAL stage 3: per-token reverse KL, the rollout horizon, "
                                "and the KL by position after the prompt (first and last logged step)."
                                + logprob_gap_note(histories[name("onpolicy")])))
    if speed is not None:
        blocks.append(speed_table(speed))
        fig = speed_figure(speed, figure_dir / "opal_speed.png")
        blocks.append(FigureRef(f"{prefix}/{fig.name}", "Decode memory (KV + states) by context length."))
    return Section("OPAL: attention -> Gated DeltaNet hybrid (seed 002)", blocks), found


def lm_eval_section(results: list[dict]) -> Section | None:
    """lm-evaluation-harness scores (``relin opal-lm-eval`` JSONs) of the teacher and the OPAL models: one row per task
    and metric, a column per model and each student's score as % of the teacher's."""
    if not results:
        return None
    names = [r["name"] for r in results]
    students = [n for n in names if n != "teacher"]
    by_name = {r["name"]: r["results"] for r in results}
    rows = []
    for task in sorted({task for r in results for task in r["results"]}):
        for metric in sorted({m for r in results for m in r["results"].get(task, {}) if not m.endswith("_stderr")}):
            score = {n: by_name[n].get(task, {}).get(metric) for n in names}
            teacher = score.get("teacher")
            recovery = [f"{100 * score[n] / teacher:.0f}%" if teacher and score[n] is not None else ""
                        for n in students]
            rows.append([task, metric, *score.values(), *recovery])
    table = Table(title="lm-evaluation-harness on the teacher and the hybrids (paper: GSM8K, MATH-500, commonsense)",
                  columns=["task", "metric", *names, *[f"{n} % of teacher" for n in students]], rows=rows,
                  note="Scored by lm-evaluation-harness's Hugging Face model class on the saved models "
                       "(opal.lm_eval: tasks, few-shot count, limit).")
    return Section("OPAL: lm-evaluation-harness benchmarks", [table])
