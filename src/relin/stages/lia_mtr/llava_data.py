"""``relin lia-mtr-llava-data --out DIR``: LLaVA-format JSON for both phases, their images and the MME release folders,
written in the ``synth_vision`` layout (:mod:`relin.data.vision.artifact`; what is read: :mod:`relin.data.vision.llava`)
with the chat LLM's tokenizer, atomically."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import LlavaDataConfig, LLMConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.llava": LlavaDataConfig, "lia_mtr.llm": LLMConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="output directory (e.g. results/lia_mtr/data)")


def run(args: argparse.Namespace, sections) -> None:
    from ...data.tokenizer import load_tokenizer
    from ...data.vision.artifact import write_synth_vision
    from ...data.vision.llava import import_llava
    from ...errors import InputError
    from ...io import atomic_dir
    from ...tracking import stage_run

    cfg, llm = sections.get("lia_mtr.llava"), sections.get("lia_mtr.llm")
    if not llm.pretrained:
        raise InputError("lia_mtr.llm.pretrained: empty; LLaVA data is read by a pretrained chat LLM's tokenizer")
    tokenizer = load_tokenizer(llm.pretrained)
    with stage_run("lia-mtr-llava-data", sections.raw, inputs=[cfg.align_json, cfg.instruct_json, cfg.image_folder,
                                                       cfg.mme_folder], outputs=[args.out]) as tracker:
        data = import_llava(cfg)
        with atomic_dir(args.out) as tmp:
            stats = write_synth_vision(tmp, data, tokenizer)
        tracker.log_metrics({k: v for k, v in stats.items() if isinstance(v, int)})
        print(f"lia-mtr-llava-data: {len(data['train']['captions'])} phase-1 and {len(data['train']['conversations'])} "
              f"phase-2 samples over {stats['train_images']} images, {len(data['mme']['questions'])} MME questions "
              f"on {stats['mme_images']} images -> {args.out}")
