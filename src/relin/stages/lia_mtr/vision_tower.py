"""``relin lia-mtr-vision-tower``: the CLIP tower. Default: a tiny ``CLIPModel`` trained contrastively on the scenes'
image-caption pairs (``clip`` objective); with ``lia_mtr.tower.pretrained`` or ``checkpoint`` (a checkpoints row,
its directory passed as ``--checkpoint``): that checkpoint, saved as is with its image processor."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import TowerConfig
from .._training import Setup, add_output_arguments, run_training
from ._vlm import add_checkpoint_argument, loaded_reference


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.tower": TowerConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="lia-mtr-synth-vision directory")
    add_checkpoint_argument(parser, "lia_mtr.tower")
    add_output_arguments(parser)


def run(args: argparse.Namespace, sections) -> None:
    import torch

    from ...data.vision.artifact import VisionData
    from ...models.vlm.tower import build_clip, load_image_processor, load_vision_tower, pixel_values
    from ...train.objectives import build_objective
    from ...train.sources import RowBatches, pad_rows
    from .._training import write_outputs

    cfg = sections.get("lia_mtr.tower")
    data = VisionData.load(args.data)
    reference = loaded_reference(cfg, args, "lia_mtr.tower")
    if reference:
        from ...tracking import stage_run

        with stage_run("lia-mtr-vision-tower", sections.raw, inputs=[args.data], outputs=[args.out]) as tracker:
            tracker.set_tags({"relin.pretrained": reference})
            # The checkpoint's own image processor travels with it: lia-mtr-clip-features prepares pixels with it.
            write_outputs(args, load_vision_tower(reference), load_image_processor(reference), [],
                          {"steps": 0, "pretrained": reference}, tracker)
        return

    def setup(env):
        tokenizer = data.tokenizer()
        images = data.images()["train"]
        model = build_clip(cfg, images.shape[1], tokenizer, seed=cfg.train.seed)
        pixels = pixel_values(images, images.shape[1])
        ids = [tokenizer(c)["input_ids"] + [tokenizer.eos_token_id] for c in data.train["captions"]]
        text = pad_rows(ids, ids, tokenizer.pad_token_id)

        def collate(idx):
            idx = torch.as_tensor(idx)
            return {"pixel_values": pixels[idx], "input_ids": text["input_ids"][idx],
                    "attention_mask": text["attention_mask"][idx]}

        batches = RowBatches(len(ids), collate, batch_size=cfg.train.batch_size, seed=cfg.train.seed,
                             max_len=text["input_ids"].shape[1], rank=env.rank, world_size=env.world_size)
        return Setup(model, tokenizer, build_objective("clip"), batches)

    run_training("lia-mtr-vision-tower", __name__, args, sections, cfg.train, setup, inputs=[args.data])
