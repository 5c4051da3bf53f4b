"""The report's LIA-MTR section (seed 000): the claims with their verdicts, the MME-style categories (the rule
behind each, what one patch's features decide, what the caption decides), the Table I analogue (every bridge,
both readings of the state and the ablations, after phase 1 and phase 2 on the MME-style set, beside the
text-only reference: the chat LLM answering from the caption), the bridge-isolated NIAH heatmaps with each
bridge's training loss and its accuracy by depth (Fig. 2), the state's norm against N (Theorem 2), Lemma 2 under
each reading, memory against N, the write-gate and mixer probe, and (with a tower that reads photos) real
photos described by the VLM after each phase.

Inputs are the stages' files as LIA-MTR's report manifest names them: per bridge its MME ``metrics.json`` and
``items.csv``, each question as ``lia-mtr-eval-mme`` scored it (``text_reference`` is the LLM from captions), the
per-patch probe, per NIAH bridge its ``metrics.json`` (with the state's norm per length), ``items.csv`` and
``history.csv``, the memory table and metrics (with Lemma 2's checks), the probe and, with a checkpoint tower, the
tower's directory (its ``config.json`` says what it is) and ``relin lia-mtr-vlm-photos``'s output.

The bridges and their labels are rows of :data:`relin.config.lia_mtr.BRIDGES`, the claims rows of
:data:`relin.config.lia_mtr.CLAIMS`, judged by :mod:`.judge` on what :class:`.lia_scores.LiaScores` measures; this
section supplies the facts their texts quote.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from ..config import lia_mtr as lia_table
from ..config.lia_mtr import BRIDGES, PROBE_MAX, REFERENCE_MIN, RETRIEVES
from ..config.report import PreconditionsConfig
from ..data.vision.synth import RULES
from ..eval.mme import read_items_file
from . import paper_figures as pf
from . import verdicts as vd
from .figures import DPI, colours, grid, legend_outside
from .judge import Context, judge_all
from .lia_scores import CATEGORIES, TEXT, LiaScores, MMEScores, norm_growth, probe_accuracy
from .lm_scores import first_replicas, replicas
from .margins import default_margins
from .page import FigureRef, Section
from .table import Table

PHASES = ("align", "instruct")
# Paper, Table I (MME accuracy %, Qwen2.5-3B, CLIP-ViT-L/14): (phase, category or overall) -> (LIA-MTR, MLP).
PAPER_TABLE1 = {("align", "accuracy"): pf.LIA_PHASE1_OVERALL, ("align", "existence"): pf.LIA_PHASE1_EXISTENCE,
                ("instruct", "accuracy"): pf.LIA_PHASE2_OVERALL, ("instruct", "scene"): pf.LIA_PHASE2_SCENE}
# What each Table I row is (its row's label).
MME_ROLES = {name: row.label for name, row in BRIDGES.items()}
# A scale whose mean mixer weight is below this carries (almost) nothing (relin.stages.lia_mtr.bridge_probe).
UNUSED_SCALE = 0.01


@dataclass(frozen=True)
class LiaSettings:
    mastery: float
    resamples: int
    margins: dict[str, vd.Margin] = field(default_factory=default_margins)
    pre: PreconditionsConfig = field(default_factory=PreconditionsConfig)


def read_inputs(files: dict) -> dict:
    """The LIA-MTR stage outputs a report manifest lists (:func:`relin.manifest.lia_mtr_files`), read by
    kind: ``mme`` ({model: metrics}), ``answers`` ({model: {phase: {task: [ScoredAnswer]}}}), ``niah_metrics``,
    ``niah_items`` ({bridge: rows}), ``niah_history``, ``memory``, ``memory_metrics``, ``probe``, ``patch_probe``,
    ``tower`` (its ``config.json``) and ``photos`` (``photos.json``)."""
    out: dict = {"mme": {}, "answers": {}, "niah_metrics": {}, "niah_items": {}, "niah_history": {}, "memory": [],
                 "memory_metrics": {}, "probe": None, "patch_probe": None, "tower": None, "photos": None}
    for entry in files.get("mme", []):
        out["mme"][entry["name"]] = json.loads(Path(entry["metrics"]).read_text())
        out["answers"][entry["name"]] = read_items_file(entry["items"])
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
    for key in ("probe", "patch_probe", "memory_metrics"):
        if files.get(key):
            out[key] = json.loads(Path(files[key]).read_text())
    for key, file in (("tower", "config.json"), ("photos", "photos.json")):
        if files.get(key):
            out[key] = json.loads((Path(files[key]) / file).read_text())
    return out


def category_table(mme: MMEScores | None, patch_probe: dict | None) -> Table | None:
    """Per category: the synthetic rule, what the best single patch decides (the per-patch probe) and what the
    caption decides (the text-only reference), with the preconditions each must meet; the control last."""
    if not patch_probe and (mme is None or (TEXT, "text") not in mme):
        return None
    rows = []
    for task in (*CATEGORIES, "control"):
        probe = probe_accuracy(patch_probe, task)
        tower = probe_accuracy((patch_probe or {}).get("tower"), task)
        tower_text = tower.text(".0f", 100, "%") if tower else "–"
        reference = mme.accuracy(TEXT, "text", task) if (
            mme is not None and task in CATEGORIES and (TEXT, "text") in mme and mme.questions(task)) else None
        if task == "control":
            if probe is None:
                continue
            rows.append(["control: background tint", "one patch decides it (shows the probe can)",
                         probe.text(".0f", 100, "%"), (patch_probe["tasks"][task]["position"]), tower_text, "–",
                         "✓" if probe.value >= REFERENCE_MIN else "✗ the probe cannot decide one patch's content"])
            continue
        ok_probe = probe is not None and probe.value <= PROBE_MAX
        ok_ref = reference is not None and reference.value >= REFERENCE_MIN
        status = "✓" if ok_probe and ok_ref else "✗ " + "; ".join(
            [*([] if ok_probe else [f"one patch decides it (> {PROBE_MAX:g})"]),
             *([] if ok_ref else [f"the caption reference fails it (< {REFERENCE_MIN:g})"])])
        rows.append([task, RULES[task], probe.text(".0f", 100, "%") if probe else "–",
                     patch_probe["tasks"][task]["position"] if probe else None, tower_text,
                     reference.text(".0f", 100, "%") if reference else "–", status])
    return Table(title="LIA-MTR MME-style categories: the rule behind each name, what one patch decides, what the "
                       "caption decides",
                 columns=["category", "synthetic rule (relin.data.vision.synth.RULES)", "per-patch probe (pixels)",
                          "best patch", "per-token probe (tower)", "caption reference (LLM)", "preconditions"],
                 rows=rows,
                 note=f"Every category is a relation between objects in different patches. Per-patch probe: for each "
                      f"patch position a logistic regression of that one patch's features, bilinear in the "
                      f"question's words; the position chosen on held-out training images, its accuracy [Wilson 95%] "
                      f"on others (chance 50%); on pixels it must stay ≤ {PROBE_MAX:.0%}. The same probe on the "
                      f"vision tower's tokens (what the bridges read) shows what the tower's self-attention already "
                      f"mixed into one token, which a per-token bridge could pass on (not a precondition). Caption "
                      f"reference: the chat LLM answering the MME-style set from each image's caption, which states "
                      f"what the questions ask; it must reach ≥ {REFERENCE_MIN:.0%}. The probe on pixels and the "
                      f"reference are preconditions of every Table I verdict.")


def tower_note(tower: dict | None) -> str:
    """What Table I's note says of a loaded tower (``tower``: its ``config.json``): a tower other than CLIP is a
    stand-in for the paper's, which was trained to align images with text; a tower trained here says nothing."""
    if not tower or tower.get("model_type", "").startswith("clip"):
        return ""
    kind = {"dinov2": "DINOv2"}.get(tower.get("model_type"), tower.get("model_type", "unknown"))
    size = f" (width {tower['hidden_size']}, patch {tower['patch_size']})" if "patch_size" in tower else ""
    return (f" The tower is {kind}{size}, not CLIP: trained without text, so nothing aligns its features with "
            f"words; a stand-in for the paper's CLIP-ViT-L/14, whose phase 1 starts from features already aligned "
            f"with text.")


def reference_note(metrics: dict) -> str:
    """How the caption reference's captions were worded (``relin.data.vision.phrasing``), where it says."""
    phrasing = metrics.get(TEXT, {}).get("phrasing")
    return f" The caption reference reads the {phrasing} captions (lia_mtr.data.phrasing)." if phrasing else ""


def table1(mme: MMEScores, metrics: dict, tower: dict | None = None) -> Table:
    rows = []
    if (TEXT, "text") in mme:
        rows.append(["LLM from captions (text-only reference)", "–", "–", mme.accuracy(TEXT, "text").text(".1f", 100),
                     mme.acc_plus(TEXT, "text").text(".1f", 100), 100 * mme.yes_share(TEXT, "text"),
                     *(mme.accuracy(TEXT, "text", c).text(".0f", 100) for c in CATEGORIES),
                     metrics.get(TEXT, {}).get("text", {}).get("perception")])
    for phase in PHASES:
        for bridge in first_replicas(list(metrics)):
            if (bridge, phase) in mme:
                rows.append([f"{bridge}: {MME_ROLES.get(bridge, '')}".rstrip(": "), phase,
                             mme.accuracy(bridge, phase).seeds, mme.accuracy(bridge, phase).text(".1f", 100),
                             mme.acc_plus(bridge, phase).text(".1f", 100), 100 * mme.yes_share(bridge, phase),
                             *(mme.accuracy(bridge, phase, c).text(".0f", 100) for c in CATEGORIES),
                             metrics[bridge][phase]["perception"]])
    for phase in PHASES:
        quoted = {key: quote for (at, key), quote in PAPER_TABLE1.items() if at == phase}
        for i, bridge in enumerate(("lia_mtr", "mlp2x_gelu")):
            rows.append([f"paper: {bridge}", phase, None, quoted["accuracy"].values[i], None, None,
                         *(quoted[c].values[i] if c in quoted else None for c in CATEGORIES), None])
    return Table(title="LIA-MTR Table I analogue: MME-style accuracy after phase 1 (align) and phase 2 (instruct)",
                 columns=["model", "phase", "seeds", "accuracy %", "acc+ %", "yes %", *CATEGORIES, "perception"],
                 rows=rows, digits=1,
                 note="Ours: the synthetic MME-style set (a true and a false yes/no question per image, in a drawn "
                      "order), scored as the official tool, [95% interval] over images (and over training seeds where "
                      "a bridge has several; the mean over them). The categories keep MME's names; each is a relation "
                      "between objects in different patches: " + "; ".join(f"{c}: {RULES[c]}" for c in CATEGORIES)
                      + ". Chance: accuracy 50%, acc+ 25% for a coin, 0% for a constant answer; 'yes %' is the share "
                        "of yes answers (50% for a model that reads the question). Paper rows: real MME with "
                        "CLIP-ViT-L/14 and Qwen2.5-3B." + reference_note(metrics) + tower_note(tower))


def photos_table(photos: dict) -> Table:
    """Real photos (``relin lia-mtr-vlm-photos``'s ``photos.json``) and what the VLM wrote of each after every phase."""
    phases = photos["phases"]
    labels = {"align": "after phase 1 (align)", "instruct": "after phase 2 (instruct)"}
    left_out = "; ".join(photos.get("left_out") or [])
    return Table(title="LIA-MTR on real photos: what the VLM (lia_mtr, first seed) writes after each phase",
                 columns=["photo", "what it shows", *(labels.get(p, p) for p in phases)],
                 rows=[[p["name"], p["description"], *(p[phase] or "(nothing)" for phase in phases)]
                       for p in photos["photos"]],
                 note=f"Asked \"{photos['prompt']}\", greedy. A qualitative look, not a score: the bridges trained "
                      f"only on drawn scenes, so a description of a photo shows what the bridge carries from an image "
                      f"it never saw the like of, and phase 2 what the conversations changed."
                      + (f" Left out: {left_out}." if left_out else ""),
                 collapsed=True)


def panels(count: int, size: tuple[float, float]) -> tuple[Figure, np.ndarray]:
    """A figure of ``count`` panels of ``size`` inches, up to four a row (room on the right for a legend), the
    grid's spare panels hidden."""
    rows, cols = grid(count, 4)
    fig = Figure(figsize=(size[0] * cols + 2.5, size[1] * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for unused in axes[count:]:
        unused.set_axis_off()
    return fig, axes


def _cell_mean(hits: list[int]) -> float:
    return float(np.mean(hits)) if hits else float("nan")


def niah_figure(items: dict[str, list[dict]], history: dict[str, list[dict]], chance: float, path: Path) -> Path:
    """Per bridge its accuracy heatmap (depth × length), and every bridge's training loss against ln(values)."""
    bridges = list(items)
    fig, axes = panels(len(bridges) + 1, (3.4, 3.0))
    image = None
    for ax, bridge in zip(axes, bridges):
        rows = items[bridge]
        lengths, depths = sorted({r["length"] for r in rows}), sorted({r["depth"] for r in rows})
        # a profile length scores only the first and last depth: the cells between are blank
        accuracy = [[_cell_mean([r["correct"] for r in rows if r["length"] == n and r["depth"] == d]) for n in lengths]
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


# What each bridge of the NIAH tests (its row's, relin.config.lia_mtr.BRIDGES).
NIAH_ROLES = {name: row.tests for name, row in BRIDGES.items() if row.tests}
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


def depth_figure(items: dict[str, list[dict]], chance: float, path: Path) -> Path:
    """Fig. 2 as profiles: per length one panel, accuracy against needle depth, one line per bridge (the mean over
    its training replicas)."""
    groups = replicas(list(items))
    bridges = first_replicas(list(items))
    lengths = sorted({r["length"] for rows in items.values() for r in rows})
    fig, axes = panels(len(lengths), (3.2, 2.8))
    for ax, length in zip(axes, lengths):
        for colour, bridge in zip(colours(len(bridges)), bridges):
            rows = [r for name in groups.get(bridge, [bridge]) for r in items[name] if r["length"] == length]
            depths = sorted({r["depth"] for r in rows})
            ax.plot(depths, [np.mean([r["correct"] for r in rows if r["depth"] == d]) for d in depths], marker="o",
                    color=colour, label=bridge)
        if chance:
            ax.axhline(chance, color="grey", ls="--", lw=0.8)
        ax.set(xlabel="needle depth (0: first pair)", ylabel="accuracy", title=f"length {length}", ylim=(-0.02, 1.02))
        ax.grid(alpha=0.3)
    legend_outside(fig, axes[0])
    fig.savefig(path, dpi=DPI)
    return path


def state_table(data: dict) -> Table | None:
    """Per NIAH bridge: the norm of the state after N tokens at each length, its growth between the two longest,
    and for the LIA-MTR family Theorem 2's ratio to the bound (≤ 1)."""
    states = {b: data["niah_metrics"][b].get("state") for b in first_replicas(list(data["niah_metrics"]))}
    states = {b: state for b, state in states.items() if state}
    lengths = sorted({int(n) for state in states.values() for n in state})
    rows = []
    for bridge, state in states.items():
        ratio = max((v.get("bound_ratio", float("nan")) for v in state.values()), default=float("nan"))
        rows.append([bridge, next(iter(state.values()))["kind"],
                     *(state[str(n)]["norm"] if str(n) in state else None for n in lengths), norm_growth(state), ratio])
    if not rows:
        return None
    return Table(title="LIA-MTR Theorem 2: the norm of each bridge's state after N tokens (trained NIAH probes)",
                 columns=["bridge", "state", *(f"N = {n}" for n in lengths), "growth exponent (two longest)",
                          "LIA-MTR: max ||M_N,s|| (1 − λ_s) / max ||u||"], rows=rows, digits=3,
                 note="The state after the last of N tokens (8 test sequences, needle at depth 0.5), mean over them: "
                      "the LIA-MTR family per scale (its largest shown), a vector (diagonal) or per-head K x V "
                      "matrices; ungated linear attention its K x V sum; softmax attention its key-value cache. "
                      "Theorem 2 bounds ||M_N,s|| by max ||u|| / (1 − λ_s): the last column is at most 1. A growth "
                      "exponent near 0 is a bounded state, near 1 (linear attention) or 0.5 (a cache of N random "
                      "rows) one that grows with N.")


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
    bridges = probe.get("bridges") or {"lia_mtr": probe}
    rows = [[name, p["gate_mean"], p["gate_std"], " / ".join(f"{x:g}" for x in p["half_lives"]),
             " / ".join(f"{x:.3f}" for x in p["mixer_mean"]),
             ", ".join(f"t½ {p['half_lives'][i]:g}" for i, w in enumerate(p["mixer_mean"]) if w < UNUSED_SCALE)
             or "none"] for name, p in bridges.items()]
    return Table(title="LIA-MTR probe: write gate, the fixed timescales and the mixer's weight on each",
                 columns=["bridge", "gate mean", "gate std (tokens)", "half-lives (steps)", "mixer weight per scale",
                          f"scales under {UNUSED_SCALE:.0%} (unused)"], rows=rows,
                 note="After phase 2, on the MME-style images. The half-lives are set by lia_mtr.bridge.mtr "
                      "(decay_min, decay_max, spacing), not learned: they are the configuration, not a result; the "
                      f"mixer's weights are learned, and a scale under {UNUSED_SCALE:.0%} of them is flagged unused. "
                      "Paper: half-lives 1.94 to 138.28, gate 0.5053 ± 0.0444.")


def context(scores: LiaScores, s: LiaSettings) -> Context:
    """What LIA-MTR's claim rows read beyond the scores: the quoted figures, and the mastery a probe must reach."""
    quoted = pf.LIA_MEMORY
    gate, lives = pf.LIA_GATE, pf.LIA_HALF_LIVES
    facts = {**scores.facts(), "mastery": s.mastery, "niah_paper": pf.LIA_NIAH.text(),
             "gate_paper": f"mean {gate.values[0]}, std {gate.values[1]} (the gate probe)",
             "mixer_paper": f"half-lives {lives.values[2]} to {lives.values[3]} used simultaneously",
             "table1": {f"{phase}_{key}": f"{quote.text(' vs ')} (LIA-MTR vs MLP, {quote.where.split(',')[0]})"
                        for (phase, key), quote in PAPER_TABLE1.items()},
             "paper_memory": f"{quoted.values[3]} GB at N = {quoted.values[2]}; MHA out of memory at N = "
                             f"{quoted.values[0]} on {quoted.values[1]} GB"}
    return Context("LIA-MTR", scores, "", s.mastery, lambda row: row, s.margins, s.pre, {"all": ()}, facts)


def claims(data: dict, mme: MMEScores | None, s: LiaSettings) -> list[vd.Claim]:
    """LIA-MTR's claim rows (:data:`relin.config.lia_mtr.CLAIMS`), in table order, as judged on this run."""
    return judge_all(lia_table.CLAIMS, context(LiaScores(data, mme, s.resamples), s))


def lia_mtr_section(files: dict, s: LiaSettings, figure_dir: Path,
                    prefix: str) -> tuple[Section, list[vd.Claim]] | None:
    """``files``: LIA-MTR's entry of its report manifest (none: no section)."""
    if not files:
        return None
    data = read_inputs(files)
    mme = MMEScores(data["answers"], s.resamples) if data["answers"] else None
    found = claims(data, mme, s)
    blocks: list = [*vd.verdict_tables(found, "LIA-MTR")]
    categories = category_table(mme, data["patch_probe"])
    if categories is not None:
        blocks.append(categories)
    if mme is not None:
        blocks.append(table1(mme, data["mme"], data["tower"]))
    if data["photos"]:
        blocks.append(photos_table(data["photos"]))
    if data["niah_items"]:
        chance = next(iter(data["niah_metrics"].values()), {}).get("chance", 0.0)
        shown = {b: data["niah_items"][b] for b in first_replicas(list(data["niah_items"]))}
        fig = niah_figure(shown, data["niah_history"], chance, figure_dir / "lia_mtr_niah.png")
        blocks.append(FigureRef(f"{prefix}/{fig.name}", "Bridge-isolated NIAH (key-value): accuracy by needle depth "
                                "and sequence length per bridge (paper Fig. 2: LIA-MTR 1.0 everywhere), and each "
                                "probe's training loss: a loss at ln(values) never learned, a heatmap below a learned "
                                "loss cannot carry the needle that far."))
        fig = depth_figure(data["niah_items"], chance, figure_dir / "lia_mtr_niah_depth.png")
        blocks.append(FigureRef(f"{prefix}/{fig.name}", "Bridge NIAH by depth: per length, accuracy against the "
                                "needle's depth (0: the first pair, 1: just before the query), each bridge the mean "
                                "over its training seeds; dashed: chance. The paper: linear attention fails the early "
                                "depths, MHA is patchy, LIA-MTR is 1.0 at every depth."))
        for table in (niah_table(data), retention_table(data), state_table(data)):
            if table is not None:
                blocks.append(table)
    if data["memory"]:
        fig = memory_figure(data["memory"], figure_dir / "lia_mtr_memory.png")
        blocks.append(FigureRef(f"{prefix}/{fig.name}", "Peak forward memory against N on the machine that ran the "
                                "DAG, as the allocator counts it (GPU: bf16, max_memory_allocated; CPU: fp32, the "
                                "profiler's record of every allocation); benchmarks/gpu/bridge_memory.py measures "
                                "the H200 sizes."))
    if data["probe"]:
        blocks.append(probe_table(data["probe"]))
    return Section("LIA-MTR: the multi-timescale retention bridge (seed 000)", blocks), found
