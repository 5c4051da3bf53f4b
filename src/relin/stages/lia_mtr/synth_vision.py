"""``relin lia-mtr-synth-vision --out DIR``: the drawn scenes of the LIA-MTR reproduction (captions, conversations,
the MME-style set) and the chat tokenizer, atomically (layout: :mod:`relin.data.vision.artifact`)."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import SynthVisionConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.data": SynthVisionConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory (e.g. results/lia_mtr/data)")


def run(args: argparse.Namespace, sections) -> None:
    from ...config.loader import as_dict
    from ...data.vision.artifact import write_synth_vision
    from ...data.vision.synth import generate, vocabulary
    from ...io import atomic_dir
    from ...models.vlm.chat import build_chat_tokenizer
    from ...tracking import stage_run

    cfg = sections.get("lia_mtr.data")
    with stage_run("lia-mtr-synth-vision", {"lia_mtr.data": as_dict(cfg)}, outputs=[args.out]) as tracker:
        data, tokenizer = generate(cfg), build_chat_tokenizer(vocabulary(cfg.phrasing))
        with atomic_dir(args.out) as tmp:
            stats = write_synth_vision(tmp, data, tokenizer)
        tracker.log_metrics({k: v for k, v in stats.items() if isinstance(v, int)})
        print(f"lia-mtr-synth-vision: {stats['train_images']} training images ({stats['distinct_captions']} distinct "
              f"captions), {stats['mme_images']} MME-style images -> {args.out}")
