"""``relin mme-probe``: the per-patch linear probe of the MME-style categories (:mod:`relin.eval.patch_probe`) on
the features the bridges read: for each category, the accuracy of the best single patch position (chosen on a
held-out split of the training images, scored on another), beside the control (the background tint, which every
patch shows). A category needs the whole image when no single patch decides it; the report shows this per
category as a precondition of every Table I verdict (``metrics.json``: per task its position, accuracy, test
questions and right answers)."""
from __future__ import annotations

import argparse


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--features", required=True, help="features directory (relin clip-features)")
    parser.add_argument("--data", required=True, help="synth-vision directory")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")


def run(args: argparse.Namespace, sections) -> None:
    from ...data.vision.artifact import VisionData, load_features
    from ...data.vision.synth import BACKGROUNDS
    from ...errors import InputError
    from ...eval.patch_probe import CONTROL, control_rows, probe_categories
    from ...io import atomic_write_json
    from ...tracking import stage_run
    from .._training import use_thread_budget

    use_thread_budget()
    data = VisionData.load(args.data)
    if "qa" not in data.train:
        raise InputError(f"{args.data}: no train.qa (the per-patch probe reads the drawn scenes' questions)")
    features = load_features(args.features)["train"]
    rows = [dict(q, index=i) for i, qa in enumerate(data.train["qa"]) for q in qa]
    rows += control_rows(data.train["scenes"], len(BACKGROUNDS))
    with stage_run("mme-probe", {}, inputs=[args.features, args.data], outputs=[args.metrics]) as tracker:
        results = probe_categories(features, rows)
        atomic_write_json(args.metrics, {"probe": "per-patch linear (bilinear in the question's words)",
                                         "patches": int(features.shape[1]), "tasks": results})
        tracker.log_metrics({f"{task}_accuracy": r["accuracy"] for task, r in results.items()})
    print("mme-probe: " + ", ".join(f"{task} {r['accuracy']:.2f}" for task, r in results.items())
          + f" (control: {CONTROL})")
