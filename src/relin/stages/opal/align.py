"""``relin opal-align``: OPAL stage 1. Only the Gated DeltaNet layers train; each one's output is
aligned to the teacher's attention output of the same layer on the same input (``layer_align``)."""
from __future__ import annotations

import argparse

from ...config.opal import AlignConfig
from ...models.saved import load_saved
from .._training import Setup, TextData, add_distillation_arguments, held_out, run_training


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"opal.align": AlignConfig, "opal.niah_protocol": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_distillation_arguments(parser, student="converted hybrid directory (relin opal-convert)")


def run(args: argparse.Namespace, sections) -> None:
    from ...train.objectives import LayerAlignment
    from ...train.teacher import FrozenTeacher
    from ...train.trainable import train_only

    cfg = sections.get("opal.align")

    def setup(env):
        data = TextData.load(args.data)
        student = data.model(args.student, load_saved)
        layers = {f"model.layers.{i}.linear_attn": f"model.layers.{i}.self_attn"
                  for i, layer in enumerate(student.model.layers) if layer.kind == "gdn"}
        train_only(student, lambda name: ".linear_attn." in name)
        objective = LayerAlignment(FrozenTeacher(data.model(args.teacher, load_saved)), layers, cfg.loss, cfg.inputs)
        batches = data.step_batches(cfg.train, env, held_out(sections.get("opal.niah_protocol")))
        return Setup(student, data.tokenizer, objective, batches)

    run_training("opal-align", __name__, args, sections, cfg.train, setup,
                 inputs=[args.teacher, args.student, args.data])
