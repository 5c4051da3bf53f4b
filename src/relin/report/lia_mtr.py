"""The report's LIA-MTR section (seed 000): the claims with their verdicts, the Table I analogue (every bridge
after phase 1 and phase 2 on the MME-style set, beside the text-only reference: the chat LLM answering from
the caption), the bridge-isolated NIAH heatmaps with each bridge's training loss (Fig. 2), memory against N,
and the write-gate probe.

Intervals: MME over images (stratified by subtask; a pair's two answers stay together, as acc+ needs), the
bridge NIAH over test sequences (stratified by cell), the gate over evaluation images, the memory exponent
from its least-squares fit (t distribution, n - 2 degrees of freedom).

Inputs are the stages' files as LIA-MTR's report manifest names them: per bridge its MME ``metrics.json`` and
``answers/<phase>/<subtask>.txt`` (``text_reference`` is the LLM from captions), per NIAH bridge its
``metrics.json``, ``items.csv`` and ``history.csv``, the memory table and the probe.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..config.report import PreconditionsConfig
from ..eval.mme import parse_answer, read_results_file
from . import verdicts as vd
from .figures import DPI, colours, grid, legend_outside
from .lm_scores import first_replicas, replicas
from .margins import default_margins
from .page import FigureRef, Section
from .table import Table

CATEGORIES = ("existence", "count", "position", "color", "scene")
PHASES = ("align", "instruct")
TEXT = "text_reference"
MME_CHANCE = 0.5
# Paper, Table I (MME accuracy %, Qwen2.5-3B, CLIP-ViT-L/14): (phase, bridge) -> overall and the categories given.
PAPER_TABLE1 = {("align", "mlp2x_gelu"): {"accuracy": 62.30, "existence": 81.67},
                ("align", "lia_mtr"): {"accuracy": 58.42, "existence": 91.67},
                ("instruct", "mlp2x_gelu"): {"accuracy": 68.11, "scene": 78.75},
                ("instruct", "lia_mtr"): {"accuracy": 71.00, "scene": 90.40}}
PAPER_GATE = (0.5053, 0.0444)
# A bridge "retrieves" a needle cell at this accuracy; exponents for "linear" and "quadratic" growth.
RETRIEVES, LINEAR, QUADRATIC = 0.9, 1.2, 1.6
# Below this many patches a fitted growth exponent says little about the asymptote.
MEMORY_MIN_N = 1024


@dataclass(frozen=True)
class LiaSettings:
    mastery: float
    resamples: int
    margins: dict[str, vd.Margin] = field(default_factory=default_margins)
    pre: PreconditionsConfig = field(default_factory=PreconditionsConfig)


def read_inputs(files: dict) -> dict:
    """The LIA-MTR stage outputs a report manifest lists (:func:`relin.report.manifest.lia_mtr_files`), read by
    kind: ``mme`` ({model: metrics}), ``answers`` ({model: {phase: {task: [MMEAnswer]}}}), ``niah_metrics``,
    ``niah_items`` ({bridge: rows}), ``niah_history``, ``memory``, ``probe``."""
    out: dict = {"mme": {}, "answers": {}, "niah_metrics": {}, "niah_items": {}, "niah_history": {}, "memory": [],
                 "probe": None}
    for entry in files.get("mme", []):
        out["mme"][entry["name"]] = json.loads(Path(entry["metrics"]).read_text())
        out["answers"][entry["name"]] = {
            phase.name: {t.stem: read_results_file(t) for t in sorted(phase.glob("*.txt"))}
            for phase in sorted(Path(entry["answers"]).iterdir()) if phase.is_dir()}
    for entry in files.get("niah", []):
        name = entry["name"]
        out["niah_metrics"][name] = json.loads(Path(entry["metrics"]).read_text())
        with open(entry["items"]) as fh:
            out["niah_items"][name] = [{"length": int(r["length"]), "depth": float(r["depth"]),
                                        "correct": int(r["correct"])} for r in csv.DictReader(fh)]
        with open(entry["history"]) as fh:
            out["niah_history"][name] = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(fh)]
    if files.get("memory"):
        with open(files["memory"]) as fh:
            out["memory"] = [{**r, "n": int(r["n"]), "peak_bytes": float(r["peak_bytes"]) if r["peak_bytes"] else None}
                             for r in csv.DictReader(fh)]
    if files.get("probe"):
        out["probe"] = json.loads(Path(files["probe"]).read_text())
    return out


class MMEScores:
    """Every model's answers to the same MME-style images, resampled by image (stratified by subtask)."""

    def __init__(self, answers: dict[str, dict[str, dict[str, list]]], resamples: int):
        self.cells: dict[tuple[str, str], dict[str, np.ndarray]] = {}
        images = None
        for model, phases in answers.items():
            for phase, tasks in phases.items():
                key = [(task, a.image) for task in CATEGORIES for a in tasks.get(task, [])[::2]]
                if images is None:
                    images = key
                if key != images:
                    continue
                right = np.array([[parse_answer(a.pred) == a.gt.lower() for a in tasks[t][i:i + 2]]
                                  for t in CATEGORIES for i in range(0, len(tasks.get(t, [])), 2)], dtype=float)
                yes = np.array([[parse_answer(a.pred) == "yes" for a in tasks[t][i:i + 2]]
                                for t in CATEGORIES for i in range(0, len(tasks.get(t, [])), 2)], dtype=float)
                self.cells[(model, phase)] = {"correct": right.sum(1), "both": right.prod(1), "yes": yes.sum(1)}
        self.task = np.array([t for t, _ in images or []])
        self.resampler = vd.Resampler(list(self.task), resamples=resamples)
        self.replicas = replicas(list(answers))

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self.cells

    def _over_seeds(self, model: str, phase: str, estimate) -> vd.Estimate:
        names = [n for n in self.replicas.get(model, [model]) if (n, phase) in self.cells]
        return vd.over_seeds([estimate(self.cells[(n, phase)]) for n in names])

    def questions(self, task: str | None = None) -> int:
        """Questions of a category (two per image), or of the whole set."""
        return 2 * int(len(self.task) if task is None else (self.task == task).sum())

    def accuracy(self, model: str, phase: str, task: str | None = None) -> vd.Estimate:
        where = None if task is None else self.task == task
        pairs = np.full(len(self.task), 2.0)
        return self._over_seeds(model, phase, lambda cells: self.resampler.ratio(cells["correct"], pairs, where))

    def acc_plus(self, model: str, phase: str) -> vd.Estimate:
        return self._over_seeds(model, phase, lambda cells: self.resampler.mean(cells["both"]))

    def yes_share(self, model: str, phase: str) -> float:
        return float(self.cells[(model, phase)]["yes"].sum() / (2 * len(self.task)))


def mme_claims(mme: MMEScores, s: LiaSettings) -> list[vd.Claim]:
    """Table I's four claims, each judged when the text-only reference answers every category it uses from the
    captions, no bridge is at the ceiling or all at chance, and each bridge has enough training seeds; the margin is
    one question (``lia_mtr.mme``) of the compared category."""
    out = []
    config = s.margins["lia_mtr.mme"]
    for phase, key, claim in (("align", "existence", "After phase 1 LIA-MTR beats the MLP on existence"),
                              ("align", None, "After phase 1 the MLP beats LIA-MTR overall"),
                              ("instruct", None, "After phase 2 LIA-MTR beats the MLP overall"),
                              ("instruct", "scene", "After phase 2 LIA-MTR beats the MLP on scene")):
        if ("lia_mtr", phase) not in mme or ("mlp2x_gelu", phase) not in mme:
            continue
        paper = [PAPER_TABLE1[(phase, b)][key or "accuracy"] for b in ("lia_mtr", "mlp2x_gelu")]
        ours = {b: mme.accuracy(b, phase, key) for b in ("lia_mtr", "mlp2x_gelu")}
        first, second = ("mlp2x_gelu", "lia_mtr") if "MLP beats" in claim else ("lia_mtr", "mlp2x_gelu")
        difference = (ours[first] - ours[second]) * 100
        margin = vd.Margin(100 * config.value / max(mme.questions(key), 1), config.reason)
        used = (key,) if key else CATEGORIES
        reference = ({c: mme.accuracy(TEXT, "text", c).value for c in used} if (TEXT, "text") in mme else {})
        pre = (vd.competent("the LLM answering from captions", reference, s.mastery),
               vd.headroom(ours, 1.0, MME_CHANCE, margin.value / 100), vd.enough_seeds(ours, s.pre.min_seeds))
        text = f"{ours['lia_mtr'].text('.1f', 100, '%')} vs {ours['mlp2x_gelu'].text('.1f', 100, '%')}"
        out.append(vd.Claim("LIA-MTR", claim, f"{paper[0]} vs {paper[1]} (LIA-MTR vs MLP, Table I)", text,
                            vd.judged(pre, lambda: vd.beats(difference, margin, (first, second))), pre,
                            seeds=min(e.seeds for e in ours.values()), margin=margin))
    return out


def niah_estimates(items: dict[str, list[dict]], resamples: int
                   ) -> tuple[vd.Resampler, dict[str, np.ndarray]] | None:
    bridges = list(items)
    if not bridges:
        return None
    cells = [(r["length"], r["depth"]) for r in items[bridges[0]]]
    same = {b: np.array([r["correct"] for r in rows], float) for b, rows in items.items()
            if [(r["length"], r["depth"]) for r in rows] == cells}
    return vd.Resampler(cells, resamples=resamples), same


def niah_claims(data: dict, s: LiaSettings) -> list[vd.Claim]:
    out = []
    found = niah_estimates(data["niah_items"], s.resamples)
    if found is None or "lia_mtr" not in found[1]:
        return out
    resampler, correct = found
    chance = data["niah_metrics"].get("lia_mtr", {}).get("chance", 0.0)
    cells = list(dict.fromkeys(resampler.strata))

    groups = replicas(list(correct))

    def mean(bridge, where=None):
        """A bridge's accuracy on the items ``where`` keeps, the mean over its training replicas."""
        names = groups.get(bridge, [bridge])
        return vd.over_seeds([resampler.mean(correct[n], where) for n in names])

    def cell(bridge, key):
        return mean(bridge, resampler.mask(lambda c: c == key))

    reference = {}
    if "mha" in correct:
        worst_mha = min(cells, key=lambda c: cell("mha", c).value)
        reference = {f"worst cell (length {worst_mha[0]}, depth {worst_mha[1]:g})": cell("mha", worst_mha).value}
    competent = vd.competent("MHA (the probe trains)", reference, s.mastery)
    per_cell = {c: cell("lia_mtr", c) for c in cells}
    worst = min(cells, key=lambda c: per_cell[c].value)
    cell_verdicts = [vd.at_least(e, RETRIEVES) for e in per_cell.values()]

    def every_cell() -> vd.Verdict:
        if any(v.outcome == vd.CONTRADICTED for v in cell_verdicts):
            return vd.Verdict(vd.CONTRADICTED, f"{sum(v.outcome == vd.CONTRADICTED for v in cell_verdicts)} cells' "
                                               f"intervals lie below {RETRIEVES:g}")
        if all(v.outcome == vd.REPRODUCED for v in cell_verdicts):
            return vd.Verdict(vd.REPRODUCED)
        return vd.inconclusive(f"some cells' intervals contain {RETRIEVES:g}")

    out.append(vd.Claim("LIA-MTR", f"Bridge NIAH: LIA-MTR retrieves at every depth and length (≥ {RETRIEVES:g})",
                        "1.0 everywhere (Fig. 2)",
                        f"worst cell {per_cell[worst].text('.2f')} (length {worst[0]}, depth {worst[1]:g}); "
                        f"{sum(v.outcome == vd.REPRODUCED for v in cell_verdicts)} of {len(cells)} cells "
                        f"≥ {RETRIEVES:g}", vd.judged((competent,), every_cell), (competent,),
                        seeds=per_cell[worst].seeds))
    if "linear_attn" in correct:
        margin = s.margins["lia_mtr.niah_gate"]
        means = {b: mean(b) for b in ("lia_mtr", "linear_attn")}
        difference = (means["lia_mtr"] - means["linear_attn"]) * 100
        pre = (competent, vd.headroom(means, 1.0, chance, margin.value / 100), vd.enough_seeds(means, s.pre.min_seeds))
        out.append(vd.Claim("LIA-MTR", "Bridge NIAH: ungated linear attention loses needles LIA-MTR keeps",
                            "fails early depths (Fig. 2)",
                            f"mean {means['lia_mtr'].text('.2f')} vs {means['linear_attn'].text('.2f')}",
                            vd.judged(pre, lambda: vd.beats(difference, margin, ("LIA-MTR", "linear attention"))),
                            pre, seeds=min(e.seeds for e in means.values()), margin=margin))
    return out


def exponent(rows: list[dict], resamples: int, seed: int = 0) -> vd.Estimate | None:
    """Least-squares slope of log peak on log N, with draws from its t distribution (n - 2 d.o.f.)."""
    points = [(math.log(r["n"]), math.log(r["peak_bytes"])) for r in rows if r["status"] == "ok" and r["peak_bytes"]]
    if len(points) < 3:
        return None
    x, y = np.array(points).T
    slope, intercept = np.polyfit(x, y, 1)
    residual = y - (slope * x + intercept)
    se = math.sqrt((residual ** 2).sum() / (len(x) - 2) / ((x - x.mean()) ** 2).sum())
    draws = slope + se * np.random.default_rng(seed).standard_t(len(x) - 2, resamples)
    return vd.Estimate(float(slope), draws)


def memory_claims(rows: list[dict], s: LiaSettings) -> list[vd.Claim]:
    """A scan's memory is linear and naive attention's quadratic by construction (checks); whether softmax attention
    as a current kernel runs it (SDPA) grows quadratically, as the paper's out-of-memory MHA did, is its claim."""
    out = []
    largest = max((r["n"] for r in rows), default=0)
    paper = "11.2 GB at N = 262,144; MHA OOM at 16,384 on 32 GB"
    parts = [("lia_mtr", "-", "LIA-MTR's forward memory grows linearly in N", vd.at_most, LINEAR, "check")]
    parts += [("mha", impl, f"softmax MHA ({impl}) memory grows quadratically in N", vd.at_least, QUADRATIC,
               "check" if impl == "naive" else "claim")
              for impl in ("naive", "sdpa") if any(r["bridge"] == "mha" and r["impl"] == impl for r in rows)]
    for bridge, impl, claim, test, threshold, kind in parts:
        estimate = exponent([r for r in rows if r["bridge"] == bridge and r["impl"] == impl], s.resamples)
        pre = (vd.reached("the largest N measured", largest, MEMORY_MIN_N),
               vd.Precondition("sizes with a measured peak", f"{'≥ 3' if estimate else 'fewer than 3'}",
                               estimate is not None))
        text = f"peak ∝ N^{estimate.text('.2f')} (N ≤ {largest})" if estimate else "–"
        out.append(vd.Claim("LIA-MTR", f"{claim} (exponent {'≤' if test is vd.at_most else '≥'} {threshold:g})", paper,
                            text, vd.judged(pre, lambda: test(estimate, threshold)), pre, kind=kind))
    return out


def probe_claims(probe: dict | None) -> list[vd.Claim]:
    """The gate's mean: the paper describes its own trained 3B model (one run; its 0.0444 is a std over tokens, not
    an interval of the mean), so ours is shown beside it, not judged against it."""
    if not probe or "gate_per_image" not in probe:
        return []
    gates = np.array(probe["gate_per_image"])
    mean = vd.Resampler(["image"] * len(gates)).mean(gates)
    pre = (vd.Precondition("a claim a smaller model can test", "a descriptive figure of the paper's one trained "
                           "Qwen2.5-3B bridge (its ± is a token std)", False),)
    return [vd.Claim("LIA-MTR", "The write gate averages about one half on evaluation data",
                     f"{PAPER_GATE[0]} ± {PAPER_GATE[1]} (token std)", f"{mean.text('.3f')} (token std "
                     f"{probe['gate_std']:.3f})", vd.judged(pre, lambda: None), pre)]


def table1(mme: MMEScores, metrics: dict) -> Table:
    rows = []
    if (TEXT, "text") in mme:
        rows.append(["LLM from captions (text-only reference)", "–", mme.accuracy(TEXT, "text").text(".1f", 100),
                     mme.acc_plus(TEXT, "text").text(".1f", 100), 100 * mme.yes_share(TEXT, "text"),
                     *(mme.accuracy(TEXT, "text", c).text(".0f", 100) for c in CATEGORIES),
                     metrics.get(TEXT, {}).get("text", {}).get("perception")])
    for phase in PHASES:
        for bridge in first_replicas(list(metrics)):
            if (bridge, phase) in mme:
                rows.append([bridge, phase, mme.accuracy(bridge, phase).text(".1f", 100),
                             mme.acc_plus(bridge, phase).text(".1f", 100), 100 * mme.yes_share(bridge, phase),
                             *(mme.accuracy(bridge, phase, c).text(".0f", 100) for c in CATEGORIES),
                             metrics[bridge][phase]["perception"]])
    for (phase, bridge), paper in PAPER_TABLE1.items():
        rows.append([f"paper: {bridge}", phase, f"{paper['accuracy']:.2f}", None, None,
                     *(f"{paper[c]:.2f}" if c in paper else None for c in CATEGORIES), None])
    return Table(title="LIA-MTR Table I analogue: MME-style accuracy after phase 1 (align) and phase 2 (instruct)",
                 columns=["model", "phase", "accuracy %", "acc+ %", "yes %", *CATEGORIES, "perception"], rows=rows,
                 digits=1, note="Ours: the synthetic MME-style set (a true and a false yes/no question per image, in a "
                                "drawn order), scored as the official tool, [95% interval] over images. Chance: "
                                "accuracy 50%, acc+ 25% for a coin, 0% for a constant answer; 'yes %' is the share of "
                                "yes answers (50% for a model that reads the question). Paper rows: real MME with "
                                "CLIP-ViT-L/14 and Qwen2.5-3B.")


def niah_figure(items: dict[str, list[dict]], history: dict[str, list[dict]], chance: float, path: Path) -> Path:
    """Per bridge its accuracy heatmap (depth × length), and every bridge's training loss against ln(values)."""
    bridges = list(items)
    panel_rows, cols = grid(len(bridges) + 1, 4)
    fig = Figure(figsize=(3.4 * cols + 2.5, 3.0 * panel_rows), layout="constrained")
    axes = fig.subplots(panel_rows, cols, squeeze=False).ravel()
    for unused in axes[len(bridges) + 1:]:
        unused.set_axis_off()
    image = None
    for ax, bridge in zip(axes, bridges):
        rows = items[bridge]
        lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
        accuracy = [[np.mean([r["correct"] for r in rows if r["length"] == n and r["depth"] == d]) for n in lengths]
                    for d in depths]
        image = ax.imshow(accuracy, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        ax.set_xticks(range(len(lengths)), [str(n) for n in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:.2f}" for d in depths])
        ax.set(xlabel="sequence length", ylabel="needle depth", title=bridge)
    if image is not None:
        fig.colorbar(image, ax=list(axes[:len(bridges)]), label="accuracy")
    loss = axes[len(bridges)]
    for colour, bridge in zip(colours(len(history)), history):
        loss.plot([r["step"] for r in history[bridge]], [r["loss"] for r in history[bridge]], color=colour,
                  label=bridge)
    if chance:
        loss.axhline(math.log(1 / chance), color="grey", ls="--", lw=0.8, label="chance: ln(values)")
    loss.set(xlabel="step", ylabel="training loss", title="probe training")
    loss.grid(alpha=0.3)
    legend_outside(fig, loss)
    fig.savefig(path, dpi=DPI)
    return path


# What each bridge of the NIAH tests (the ablations: relin.config.lia_mtr.MTR_ABLATIONS).
NIAH_ROLES = {"lia_mtr": "the paper's bridge (eqs. 1-5)", "lia_mtr_no_gate": "g ≡ 1: is the write gate needed?",
              "lia_mtr_one_scale": "S = 1: are several timescales needed?",
              "lia_mtr_half_life": "half-lives 1.94 / 8.6 / 31 / 138: is the log-λ spacing's bunching the limit?",
              "lia_mtr_normalized": "a denominator (our reading): does normalising m_t help?",
              "linear_attn": "ungated linear attention (a K x V state per head: more memory, not an ablation)",
              "mha": "softmax attention: the reference that must succeed"}
# A probe "did not learn" when its last logged loss is above this share of chance's ln(values).
UNLEARNED = 0.9


def niah_table(data: dict) -> Table | None:
    """Per bridge: accuracy at the trained and the longest lengths, the last training loss against chance's, and
    the reading: did not learn (loss near ln(values)), learned but does not carry the needle past the trained
    lengths, or carries it."""
    rows = []
    for bridge in first_replicas(list(data["niah_items"])):
        items, metrics = data["niah_items"][bridge], data["niah_metrics"].get(bridge, {})
        history = data["niah_history"].get(bridge) or [{}]
        chance = metrics.get("chance", 0.0)
        trained = max(metrics.get("trained_lengths") or [0])
        lengths = sorted({r["length"] for r in items})
        near = [r["correct"] for r in items if r["length"] <= trained] or [r["correct"] for r in items
                                                                         if r["length"] == lengths[0]]
        far = [r["correct"] for r in items if r["length"] == lengths[-1]]
        loss, floor = history[-1].get("loss", float("nan")), math.log(1 / chance) if chance else float("nan")
        if not loss < UNLEARNED * floor:
            reading = "did not learn (loss at chance)"
        elif np.mean(far) >= RETRIEVES:
            reading = f"carries the needle to {lengths[-1]}"
        elif np.mean(near) >= RETRIEVES:
            reading = f"learned at ≤ {trained}, loses the needle by {lengths[-1]}"
        else:
            reading = "learned in part"
        rows.append([bridge, NIAH_ROLES.get(bridge, ""), float(np.mean(near)), float(np.mean(far)), loss, floor,
                     reading])
    if not rows:
        return None
    return Table(title="Bridge NIAH (key-value): what each bridge and ablation shows",
                 columns=["bridge", "tests", "accuracy ≤ trained length", "accuracy, longest", "last loss",
                          "chance loss", "reading"], rows=rows, digits=2,
                 note=f"Chance accuracy 1 / values. 'did not learn': the last training loss is above {UNLEARNED:g} "
                      f"x ln(values); a bridge that learned at its trained lengths but not beyond cannot carry the "
                      f"needle that far (see the limit below).")


def retention_table(data: dict) -> Table | None:
    """The weight a needle keeps under LIA-MTR's fixed decays at each cell, beside LIA-MTR's accuracy, and the
    verdict line that tells 'impossible under eqs. 3-5' from 'not learned'."""
    metrics = data["niah_metrics"].get("lia_mtr", {})
    limit = metrics.get("retention")
    items = data["niah_items"].get("lia_mtr")
    if not limit or not items:
        return None
    chance, lam = metrics.get("chance", 0.0), limit["slowest_decay"]
    rows, impossible, unlearned = [], [], []
    for cell in limit["cells"]:
        hits = [r["correct"] for r in items if r["length"] == cell["length"] and r["depth"] == cell["depth"]]
        accuracy = float(np.mean(hits)) if hits else float("nan")
        rows.append([cell["length"], cell["depth"], cell["distance"], f"{cell['retained']:.2e}",
                     cell["gate_logit_margin"], "impossible" if cell["impossible"] else "allowed", accuracy])
        if cell["impossible"]:
            impossible.append(cell)
        elif accuracy < RETRIEVES:
            unlearned.append(cell)
    line = (f"Under eqs. 3-5 with λ_max = {lam:g}, {len(impossible)} of {len(rows)} cells keep less than 2^-23 of the "
            f"needle: impossible there by construction, whatever is learned. " +
            (f"In the {len(unlearned)} cells the decays allow, LIA-MTR stays below {RETRIEVES:g} (chance {chance:g}): "
             f"not learned (the gate cannot single out a pair the query names only at the end)."
             if unlearned else "In every cell the decays allow, LIA-MTR retrieves."))
    return Table(title="LIA-MTR bridge NIAH: what the fixed decays allow",
                 columns=["length", "depth", "distance", "weight kept λ_max^d", "gate-logit margin needed",
                          "under eqs. 3-5", "LIA-MTR accuracy"], rows=rows, digits=2,
                 note=line + " A needle d steps before the read keeps at most λ_max^d of its write (the mixer on the "
                      "slowest scale); for it to weigh as much as the pairs just before the read, its gate logit would "
                      "have to exceed theirs by d · ln(1/λ_max). Below fp32's 2^-23 it is lost to rounding.")


def memory_figure(rows: list[dict], path: Path) -> Path:
    fig = Figure(figsize=(7.5, 3.6), layout="constrained")
    ax = fig.add_subplot()
    keys = list(dict.fromkeys((r["bridge"], r["impl"]) for r in rows))
    for colour, key in zip(colours(len(keys)), keys):
        pts = [(r["n"], r["peak_bytes"] / 2**20) for r in rows if (r["bridge"], r["impl"]) == key
               and r["status"] == "ok" and r["peak_bytes"]]
        if pts:
            ax.plot(*zip(*pts), marker="o", color=colour, label=key[0] if key[1] == "-" else f"{key[0]} ({key[1]})")
    ax.set(xscale="log", yscale="log", xlabel="visual patches N", ylabel="peak forward memory (MiB)")
    ax.grid(alpha=0.3)
    legend_outside(fig, ax)
    fig.savefig(path, dpi=DPI)
    return path


def probe_table(probe: dict) -> Table:
    return Table(title="LIA-MTR probe: write gate and the fixed timescales",
                 columns=["gate mean", "gate std (tokens)", "half-lives (steps)", "mixer weight per scale"],
                 rows=[[probe["gate_mean"], probe["gate_std"], " / ".join(f"{x:g}" for x in probe["half_lives"]),
                        " / ".join(f"{x:.3f}" for x in probe["mixer_mean"])]],
                 note="The half-lives are set by lia_mtr.bridge.mtr (decay_min, decay_max, spacing), not learned: "
                      "they are the configuration, not a result. Paper: half-lives 1.94 to 138.28, gate "
                      "0.5053 ± 0.0444.")


def lia_mtr_section(files: dict, s: LiaSettings, figure_dir: Path,
                    prefix: str) -> tuple[Section, list[vd.Claim]] | None:
    """``files``: LIA-MTR's entry of its report manifest (none: no section)."""
    if not files:
        return None
    data = read_inputs(files)
    mme = MMEScores(data["answers"], s.resamples) if data["answers"] else None
    found = [*(mme_claims(mme, s) if mme else []), *niah_claims(data, s), *memory_claims(data["memory"], s),
             *probe_claims(data["probe"])]
    blocks: list = [*vd.verdict_tables(found, "LIA-MTR")]
    if mme is not None:
        blocks.append(table1(mme, data["mme"]))
    if data["niah_items"]:
        chance = next(iter(data["niah_metrics"].values()), {}).get("chance", 0.0)
        shown = {b: data["niah_items"][b] for b in first_replicas(list(data["niah_items"]))}
        fig = niah_figure(shown, data["niah_history"], chance, figure_dir / "lia_mtr_niah.png")
        blocks.append(FigureRef(f"{prefix}/{fig.name}", "Bridge-isolated NIAH (key-value): accuracy by needle depth "
                                "and sequence length per bridge (paper Fig. 2: LIA-MTR 1.0 everywhere), and each "
                                "probe's training loss: a loss at ln(values) never learned, a heatmap below a learned "
                                "loss cannot carry the needle that far."))
        table = niah_table(data)
        if table is not None:
            blocks.append(table)
        limit = retention_table(data)
        if limit is not None:
            blocks.append(limit)
    if data["memory"]:
        fig = memory_figure(data["memory"], figure_dir / "lia_mtr_memory.png")
        blocks.append(FigureRef(f"{prefix}/{fig.name}", "Peak forward memory against N on the machine that ran the DAG "
                                "(GPU: bf16, max_memory_allocated; CPU: fp32, RSS); benchmarks/gpu/bridge_memory.py "
                                "measures the H200 sizes."))
    if data["probe"]:
        blocks.append(probe_table(data["probe"]))
    return Section("LIA-MTR: the multi-timescale retention bridge (seed 000)", blocks), found
