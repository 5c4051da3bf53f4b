"""``relin lia-mtr-vlm-photos --tower DIR --features DIR --model PHASE=DIR ...``: the real photos installed packages
ship (:mod:`relin.data.vision.photos`) described by one bridge's VLM after each phase, greedy, a qualitative look at
what the bridge carries from a real image to the LLM (the scenes are drawn; these are not).

Each photo goes through the tower with its own image processor (shortest side to the tower's size, centre crop) and
the feature layer ``lia-mtr-clip-features`` cached (its ``features.json``); the VLM is asked :data:`PROMPT` in its chat
format. Writes ``OUT/photos.json`` (per photo: package, file, what it shows, each phase's answer; the packages left
out) and ``OUT/photos.md``, the same as a table.
"""
from __future__ import annotations

import argparse

from ...config.eval import EvalConfig

PROMPT = "describe the image ."  # the scenes' question style: lower case, a spaced full stop
ANSWER_TOKENS = 24


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"eval": EvalConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tower", required=True, help="vision tower directory (relin lia-mtr-vision-tower)")
    parser.add_argument("--features", required=True, help="features directory (relin lia-mtr-clip-features): its layer")
    parser.add_argument("--model", nargs="+", required=True, metavar="PHASE=DIR", help="VLM directory per phase")
    parser.add_argument("--out", required=True, help="directory to write photos.json and photos.md into")


def photo_features(tower, processor, images: list, select_layer: int):
    """``[N, P, D]`` features of RGB uint8 photos of any sizes: each prepared by the tower's processor."""
    import torch

    rows = []
    with torch.no_grad():
        for image in images:
            pixels = processor(images=[image], return_tensors="pt")["pixel_values"]
            hidden = tower(pixel_values=pixels, output_hidden_states=True).hidden_states
            rows.append(hidden[select_layer][:, 1:].float())
    return torch.cat(rows)


def table(rows: list[dict], phases: list[str], missing: list[str]) -> str:
    """The Markdown table of ``photos.md``."""
    def cell(text: str) -> str:
        return text.replace("|", "/").replace("\n", " ") or "(nothing)"

    lines = [f"| photo | what it shows | {' | '.join(phases)} |", "|---|---|" + "---|" * len(phases)]
    lines += [f"| {r['name']} | {r['description']} | {' | '.join(cell(r[p]) for p in phases)} |" for r in rows]
    return "\n".join([f"Asked: \"{PROMPT}\" (greedy, {ANSWER_TOKENS} tokens)", "", *lines, "",
                      *(f"- {note}" for note in missing), ""])


def run(args: argparse.Namespace, sections) -> None:
    import json
    from pathlib import Path

    from ...data.vision.photos import available_photos
    from ...errors import InputError
    from ...io import atomic_dir
    from ...models.vlm.tower import load_image_processor, load_vision_tower
    from ...tracking import stage_run
    from ._answers import phase_answers, phase_models
    from ._vlm import flush_denormals

    flush_denormals()
    cfg = sections.get("eval")
    models = phase_models(args.model)
    processor = load_image_processor(args.tower)
    if processor is None:
        raise InputError(f"--tower {args.tower}: no preprocessor_config.json (expected a checkpoint's tower, whose "
                         f"image processor sizes a photo for it)")
    photos, missing = available_photos()
    if not photos:
        raise InputError(f"no photo found ({'; '.join(missing)}); expected scikit-image, scikit-learn or matplotlib")
    select_layer = json.loads((Path(args.features) / "features.json").read_text())["select_layer"]
    features = photo_features(load_vision_tower(args.tower).eval(), processor, [image for _, image in photos],
                              select_layer)
    questions = [{"question": PROMPT, "index": i} for i in range(len(photos))]
    rows = [{"name": p.name, "package": p.package, "file": p.path, "description": p.description} for p, _ in photos]
    with stage_run("lia-mtr-vlm-photos", sections.raw, inputs=[args.tower, args.features, *models.values()],
                   outputs=[args.out]) as tracker:
        for phase, path in models.items():
            answers = phase_answers(path, questions, features, cfg.batch_size, max_new_tokens=ANSWER_TOKENS)
            for row, answer in zip(rows, answers):
                row[phase] = answer
        with atomic_dir(args.out) as tmp:
            (tmp / "photos.json").write_text(json.dumps({"prompt": PROMPT, "phases": list(models), "photos": rows,
                                                         "left_out": missing}, indent=2) + "\n")
            (tmp / "photos.md").write_text(table(rows, list(models), missing))
        tracker.log_metrics({"photos": len(rows)})
    print(f"lia-mtr-vlm-photos: {len(rows)} photos described after {', '.join(models)} -> {args.out}")
