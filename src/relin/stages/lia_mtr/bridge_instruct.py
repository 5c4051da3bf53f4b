"""``relin lia-mtr-bridge-instruct --bridge NAME``: LLaVA phase 2. The phase-1 bridge and the LLM train together on
the conversations; only the assistant tokens are supervised (through the chat template)."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import PhaseConfig
from .._training import Setup, run_training
from ._vlm import add_bridge_arguments, feature_batches, flush_denormals, phase_rows


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.instruct": PhaseConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bridge_arguments(parser, start="phase-1 model directory (relin lia-mtr-bridge-align)")


def run(args: argparse.Namespace, sections) -> None:
    from ...data.tokenizer import load_tokenizer
    from ...data.vision.artifact import VisionData, load_features
    from ...models.vlm.model import BridgeVLM
    from ...train.objectives import build_objective

    cfg = sections.get("lia_mtr.instruct")

    def setup(env):
        flush_denormals()
        tokenizer, model = load_tokenizer(args.start), BridgeVLM.from_pretrained(args.start)
        features = load_features(args.features)["train"]
        ids, labels, images = phase_rows(VisionData.load(args.data), tokenizer, "instruct", features.shape[1])
        batches = feature_batches(ids, labels, images, features, tokenizer.pad_token_id, cfg.train, env)
        return Setup(model, tokenizer, build_objective("vlm_ce"), batches)

    run_training("lia-mtr-bridge-instruct", __name__, args, sections, cfg.train, setup,
                 inputs=[args.start, args.features, args.data], tags={"bridge": args.bridge})
