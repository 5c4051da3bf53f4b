"""``relin lia-mtr-eval-mme --bridge NAME --model PHASE=DIR ...``: the MME-style set answered by one bridge's VLM
after each phase (greedy, a few tokens), written in the official layout
(``OUT/<phase>/<subtask>.txt``) and scored as the official tool (:mod:`relin.eval.mme`).

``metrics.json``: per phase the perception total, the share of "yes" answers and, per subtask and overall,
accuracy and acc+ in percent (the paper's Table I reports accuracy in percent); ``items.csv``: each question as
scored (phase, subtask, image, the parsed answer, right or wrong), which the report resamples; ``mme.png``: accuracy
per category and phase. ``relin lia-mtr-mme-text`` answers the same set from captions (the text-only reference).
"""
from __future__ import annotations

import argparse

from ...config.eval import EvalConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"eval": EvalConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bridge", required=True, help="bridge name (a label in the metrics)")
    parser.add_argument("--model", nargs="+", required=True, metavar="PHASE=DIR", help="VLM directory per phase")
    parser.add_argument("--features", required=True, help="features directory (relin lia-mtr-clip-features)")
    parser.add_argument("--data", required=True, help="lia-mtr-synth-vision directory")
    parser.add_argument("--out", required=True, help="answers directory to write (official layout per phase)")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")
    parser.add_argument("--items", required=True, help="per-question scores (CSV) to write")
    parser.add_argument("--figure", required=True, help="figure (PNG) to write")


def run(args: argparse.Namespace, sections) -> None:
    from ...data.vision.artifact import VisionData, load_features
    from ...eval.mme import ITEM_COLUMNS
    from ...eval.mme_answers import write_and_score
    from ...eval.plots import save_figure
    from ...io import atomic_dir, atomic_write_csv, atomic_write_json
    from ...tracking import stage_run
    from ._answers import phase_answers, phase_models
    from ._vlm import flush_denormals

    flush_denormals()
    cfg = sections.get("eval")
    models = phase_models(args.model)
    questions = VisionData.load(args.data).mme["questions"]
    features = load_features(args.features)["mme"]
    metrics, items = {"bridge": args.bridge}, []
    with stage_run("lia-mtr-eval-mme", sections.raw, inputs=[*models.values(), args.features, args.data],
                   outputs=[args.out, args.metrics, args.items, args.figure]) as tracker:
        with atomic_dir(args.out) as tmp:
            for phase, path in models.items():
                preds = phase_answers(path, questions, features, cfg.batch_size)
                metrics[phase], scored = write_and_score(tmp / phase, questions, preds)
                items += scored
                tracker.log_metrics({f"{phase}_accuracy": metrics[phase]["accuracy"],
                                     f"{phase}_perception": metrics[phase]["perception"],
                                     f"{phase}_yes_share": metrics[phase]["yes_share"]})
                print(f"lia-mtr-eval-mme {args.bridge} {phase}: accuracy {metrics[phase]['accuracy']}%, "
                      f"perception {metrics[phase]['perception']}, yes {metrics[phase]['yes_share']}%")
        # Inside the run: every output gets its manifest (the report records this run as their producer).
        atomic_write_json(args.metrics, metrics)
        atomic_write_csv(args.items, items, ITEM_COLUMNS)
        save_figure(mme_figure(metrics, [p for p in models]), args.figure)


def mme_figure(metrics: dict, phases: list[str]):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 3))
    ax = fig.add_subplot()
    tasks = list(metrics[phases[0]]["tasks"])
    width = 0.8 / len(phases)
    for i, phase in enumerate(phases):
        ax.bar([t + i * width for t in range(len(tasks))], [metrics[phase]["tasks"][t]["acc"] for t in tasks],
               width, label=phase)
    ax.set_xticks([t + width * (len(phases) - 1) / 2 for t in range(len(tasks))], tasks)
    ax.set_ylabel("accuracy %")
    ax.set_ylim(0, 100)
    ax.axhline(50, color="grey", lw=0.5, ls="--")
    ax.set_title(f"MME-style accuracy: {metrics['bridge']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
