"""``relin lia-mtr-clip-features``: LLaVA's visual tokens, the tower's penultimate-layer patch features without CLS,
for every training and MME-style image, cached as ``features.safetensors`` (fp32 ``[N, P, d_vision]``)."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import TowerConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.tower": TowerConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tower", required=True, help="vision tower directory (relin lia-mtr-vision-tower)")
    parser.add_argument("--data", required=True, help="lia-mtr-synth-vision directory")
    parser.add_argument("--out", required=True, help="features directory to write")


def run(args: argparse.Namespace, sections) -> None:
    from safetensors.torch import save_file

    from ...data.vision.artifact import VisionData
    from ...devices import compute_device
    from ...io import atomic_dir, atomic_write_json
    from ...models.vlm.tower import load_image_processor, load_vision_tower, patch_features
    from ...tracking import stage_run

    cfg = sections.get("lia_mtr.tower")
    with stage_run("lia-mtr-clip-features", sections.raw, inputs=[args.tower, args.data],
                   outputs=[args.out]) as tracker:
        vision, images = load_vision_tower(args.tower).to(compute_device()), VisionData.load(args.data).images()
        processor = load_image_processor(args.tower)
        features = {split: patch_features(vision, images[split], cfg.select_layer, processor=processor).contiguous()
                    for split in ("train", "mme")}
        shapes = {split: list(f.shape) for split, f in features.items()}
        with atomic_dir(args.out) as tmp:
            save_file(features, str(tmp / "features.safetensors"))
            atomic_write_json(tmp / "features.json", {"shapes": shapes, "select_layer": cfg.select_layer})
        tracker.log_metrics({"patches": shapes["train"][1], "d_vision": shapes["train"][2]})
        print(f"lia-mtr-clip-features: {shapes} (layer {cfg.select_layer}, CLS dropped) -> {args.out}")
