"""``relin hedgemamba-hedgehog-match``: HedgeMamba stage 1 (seeds/001 §3.1). The GPT-NeoX (or Llama) teacher's attention
layers become Hedgehog layers with its projections and identity feature maps; the teacher stays frozen and only the
feature maps train, each layer on the teacher's input to it (``attention_match``, the loss a named option)."""
from __future__ import annotations

import argparse

from ...config.hedgemamba import HedgehogLayerConfig, MatchConfig
from ...models.saved import load_saved
from .._training import Setup, TextData, add_output_arguments, run_training


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"hedgemamba.hedgehog": HedgehogLayerConfig, "hedgemamba.match": MatchConfig,
            "hedgemamba.kernel_backend": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--teacher", required=True, help="GPT-NeoX or Llama teacher model directory (frozen)")
    parser.add_argument("--data", required=True, help="synth-text dataset directory")
    add_output_arguments(parser)


def run(args: argparse.Namespace, sections) -> None:
    from ...models.convert.hedgemamba import hedgehog_from_teacher, teacher_attention
    from ...train.objectives import AttentionMatch
    from ...train.teacher import FrozenTeacher
    from ...train.trainable import train_only

    cfg = sections.get("hedgemamba.match")

    def setup(env):
        data = TextData.load(args.data)
        teacher = data.model(args.teacher, load_saved)
        student = hedgehog_from_teacher(teacher, seed=cfg.train.seed, hedgehog=sections.get("hedgemamba.hedgehog"),
                                        kernel_backend=sections.get("hedgemamba.kernel_backend"))
        data.check_fits(student.config.max_position_embeddings, "max_position_embeddings")
        train_only(student, lambda name: ".feature_map_" in name)
        layers = {f"model.layers.{i}.linear_attn": teacher_attention(teacher, i)
                  for i in range(student.config.num_hidden_layers)}
        objective = AttentionMatch(FrozenTeacher(teacher), layers, cfg.loss, cfg.query_block)
        return Setup(student, data.tokenizer, objective, data.step_batches(cfg.train, env))

    run_training("hedgemamba-hedgehog-match", __name__, args, sections, cfg.train, setup,
                 inputs=[args.teacher, args.data], tags={"relin.loss": cfg.loss})
