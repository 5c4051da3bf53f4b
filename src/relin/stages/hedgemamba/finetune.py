"""``relin hedgemamba-finetune --variant hedgemamba|random|hedgehog``: HedgeMamba stage 2 (seeds/001 §3.2) and
its controls, cross-entropy on the dataset with every parameter but the embeddings trained (conv, gate, Δ and
Λ unlocked):

- ``hedgemamba``: the converted model (``--student``: relin hedgemamba-init's output);
- ``random``: the same HedgeMamba shape with its mixers freshly initialised and everything else the
  teacher's (``--student``: the teacher), trained for stage 1's and stage 2's rows together, the same budget;
- ``hedgehog``: the stage-1 Hedgehog model without conversion (``--student``: relin hedgehog-match's output).
"""
from __future__ import annotations

import argparse
import dataclasses
import math

from ...config.hedgemamba import FinetuneConfig, HedgehogLayerConfig, MambaBlockConfig
from ...config.train import TrainConfig
from .._training import Setup, TextData, add_output_arguments, run_training

VARIANTS = ("hedgemamba", "random", "hedgehog")


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    sections = {"hedgemamba.finetune": FinetuneConfig}
    if args.variant == "random":
        sections.update({"hedgemamba.match.train": TrainConfig, "hedgemamba.hedgehog": HedgehogLayerConfig,
                         "hedgemamba.mamba": MambaBlockConfig, "hedgemamba.kernel_backend": str})
    return sections


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, choices=VARIANTS)
    parser.add_argument("--student", required=True, help="model to fine-tune (hedgemamba-init or hedgehog-match "
                                                          "output), or for --variant random the teacher")
    parser.add_argument("--data", required=True, help="synth-text dataset directory")
    add_output_arguments(parser)


def budget_steps(match: TrainConfig, finetune: TrainConfig) -> int:
    """Stage 2's steps plus stage 1's, in stage 2's rows per step: the random control's equal budget of rows."""
    rows = match.steps * match.batch_size * match.grad_accum
    return finetune.steps + math.ceil(rows / (finetune.batch_size * finetune.grad_accum))


def frozen(name: str, freeze: str) -> bool:
    """The embeddings stay the teacher's: the input embedding, and the untied output one unless ``input_embedding``."""
    return name.startswith("model.embed_tokens.") or (freeze == "embeddings" and name.startswith("lm_head."))


def run(args: argparse.Namespace, sections) -> None:
    from ...models.convert.hedgemamba import random_mamba_from_teacher
    from ...models.teachers import load_pretrained
    from ...train.objectives import build_objective
    from ...train.trainable import train_only

    cfg = sections.get("hedgemamba.finetune")
    train_cfg = cfg.train
    if args.variant == "random":
        steps = budget_steps(sections.get("hedgemamba.match.train"), train_cfg)
        train_cfg = dataclasses.replace(train_cfg, steps=steps)

    def setup(env):
        data = TextData.load(args.data)
        if args.variant == "random":
            student = random_mamba_from_teacher(load_pretrained(args.student), seed=train_cfg.seed,
                                                hedgehog=sections.get("hedgemamba.hedgehog"),
                                                mamba=sections.get("hedgemamba.mamba"),
                                                kernel_backend=sections.get("hedgemamba.kernel_backend"))
        else:
            student = load_pretrained(args.student)
        train_only(student, lambda name: not frozen(name, cfg.freeze))
        return Setup(student, data.tokenizer, build_objective("ce"), data.step_batches(train_cfg, env))

    run_training("hedgemamba-finetune", __name__, args, sections, train_cfg, setup,
                 inputs=[args.student, args.data], tags={"relin.variant": args.variant})
