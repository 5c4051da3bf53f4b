"""``relin lia-mtr-mme-probe``: the per-patch linear probe of the MME-style categories
(:mod:`relin.eval.patch_probe`): for each category, the accuracy of the best single patch position (chosen on a
held-out split of the training images, scored on another), beside the control (the background tint, which every
patch shows). It reads two features:

- ``tasks``: each patch's pixels, what decides whether the *category* needs the whole image (a precondition of
  every Table I verdict, shown per category in the report);
- ``tower.tasks``: the vision tower's patch tokens, the features the bridges read. The tower's self-attention
  mixes the image into each token (as CLIP's does), so one token may already hold part of a relation: what a
  per-token bridge (the MLP) could pass on without mixing, shown beside the pixels' figure.

``metrics.json``: per task its position, accuracy, test questions and right answers, for each of the two."""
from __future__ import annotations

import argparse
import math


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--features", required=True, help="features directory (relin lia-mtr-clip-features)")
    parser.add_argument("--data", required=True, help="lia-mtr-synth-vision directory")
    parser.add_argument("--metrics", required=True, help="metrics JSON to write")


def run(args: argparse.Namespace, sections) -> None:
    from ...data.vision.artifact import VisionData, load_features
    from ...data.vision.synth import BACKGROUNDS
    from ...errors import InputError
    from ...eval.patch_probe import CONTROL, control_rows, pixel_patches, probe_categories
    from ...io import atomic_write_json
    from ...tracking import stage_run

    data = VisionData.load(args.data)
    if "qa" not in data.train:
        raise InputError(f"{args.data}: no train.qa (the per-patch probe reads the drawn scenes' questions)")
    features = load_features(args.features)["train"]
    rows = [dict(q, index=i) for i, qa in enumerate(data.train["qa"]) for q in qa]
    rows += control_rows(data.train["scenes"], len(BACKGROUNDS))
    images = data.images()["train"].numpy()
    side = patch_side(images, features)
    with stage_run("lia-mtr-mme-probe", {}, inputs=[args.features, args.data], outputs=[args.metrics]) as tracker:
        pixels = probe_categories(pixel_patches(images, side), rows)
        tower = probe_categories(features, rows)
        atomic_write_json(args.metrics, {"probe": "per-patch linear (bilinear in the question's words)",
                                         "patches": int(features.shape[1]), "tasks": pixels,
                                         "tower": {"tasks": tower}})
        tracker.log_metrics({**{f"{task}_accuracy": r["accuracy"] for task, r in pixels.items()},
                             **{f"tower_{task}_accuracy": r["accuracy"] for task, r in tower.items()}})
    for name, results in (("pixels", pixels), ("tower", tower)):
        print(f"lia-mtr-mme-probe ({name}): " + ", ".join(f"{task} {r['accuracy']:.2f}" for task, r in results.items())
              + f" (control: {CONTROL})")


def patch_side(images, features) -> int:
    """The side in pixels of the tower's patches: ``[N, H, W, 3]`` images read as ``[N, P, d]`` tokens, P square."""
    from ...errors import InputError

    grid = math.isqrt(int(features.shape[1]))
    side = int(images.shape[1])
    if grid * grid != features.shape[1] or side % grid or images.shape[1] != images.shape[2]:
        raise InputError(f"features: {features.shape[1]} tokens do not tile the {side}x{images.shape[2]} images in "
                         f"square patches (expected a square grid of patch tokens, no class token)")
    return side // grid
