"""``relin lia-mtr-bridge-align --bridge NAME``: LLaVA phase 1. A fresh bridge between the features and the frozen
chat LLM learns alone to make the LLM write each image's caption (only the bridge trains)."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import BridgeConfig, PhaseConfig
from .._training import Setup, run_training
from ._vlm import add_bridge_arguments, feature_batches, flush_denormals, phase_rows


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.align": PhaseConfig, "lia_mtr.bridge": BridgeConfig, "lia_mtr.kernel_backend": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_bridge_arguments(parser, start="chat LLM directory (relin lia-mtr-chat-lm)")


def run(args: argparse.Namespace, sections) -> None:
    from ...data.tokenizer import load_tokenizer
    from ...data.vision.artifact import VisionData, load_features
    from ...layers.bridges import Bridge
    from ...models.teachers import load_pretrained
    from ...models.vlm.chat import IMAGE
    from ...models.vlm.model import BridgeVLM
    from ...train.objectives import build_objective

    cfg, bridge_cfg = sections.get("lia_mtr.align"), sections.get("lia_mtr.bridge")

    def setup(env):
        flush_denormals()
        import torch

        tokenizer, llm = load_tokenizer(args.start), load_pretrained(args.start)
        features = load_features(args.features)["train"]
        ids, labels, images = phase_rows(VisionData.load(args.data), tokenizer, "align", features.shape[1])
        torch.manual_seed(cfg.train.seed)
        bridge = Bridge(args.bridge, features.shape[-1], llm.config.hidden_size, bridge_cfg,
                        sections.get("lia_mtr.kernel_backend"))
        llm.requires_grad_(False)
        model = BridgeVLM(bridge, llm, tokenizer.convert_tokens_to_ids(IMAGE))
        batches = feature_batches(ids, labels, images, features, tokenizer.pad_token_id, cfg.train, env)
        return Setup(model, tokenizer, build_objective("vlm_ce"), batches)

    run_training("lia-mtr-bridge-align", __name__, args, sections, cfg.train, setup,
                 inputs=[args.start, args.features, args.data], tags={"bridge": args.bridge})
