"""``relin hedgemamba-finetune --variant hedgemamba|random|mil|hedgehog``: HedgeMamba stage 2 (seeds/001 §3.2)
and its controls, cross-entropy on the dataset with every parameter but the embeddings trained (conv, gate, Δ
and Λ unlocked; Λ and Δ with their own optimizer settings, ``decay_lr_scale``):

- ``hedgemamba``: the converted model (``--student``: relin hedgemamba-init's output);
- ``random``: the same HedgeMamba shape with its mixers freshly initialised and everything else the
  teacher's (``--student``: the teacher), trained for stage 1's and stage 2's rows together, the same budget;
- ``mil``: Mamba-in-the-Llama's initialisation, the teacher's q/k/v/o copied into the same blocks with the
  feature maps at their identity init, no attention matching (``--student``: the teacher), the same budget;
- ``hedgehog``: the stage-1 Hedgehog model without conversion (``--student``: relin hedgehog-match's output).

``decays.json``: per HedgeMamba layer and head, A_log, dt_bias and the half-life ln 2 / (exp(A_log) ·
softplus(dt_bias)) in tokens (at the input-independent Δ), before and after training.
"""
from __future__ import annotations

import argparse
import dataclasses
import math

from ...config.hedgemamba import FinetuneConfig, HedgehogLayerConfig, MambaBlockConfig
from ...config.train import TrainConfig
from ...models.saved import load_saved
from .._training import Setup, TextData, add_output_arguments, run_training

VARIANTS = ("hedgemamba", "random", "mil", "hedgehog")
# Variants built from the teacher, trained for stage 1's and stage 2's rows together.
FROM_TEACHER = ("random", "mil")


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    sections = {"hedgemamba.finetune": FinetuneConfig}
    if args.variant in FROM_TEACHER:
        sections.update({"hedgemamba.match.train": TrainConfig, "hedgemamba.hedgehog": HedgehogLayerConfig,
                         "hedgemamba.mamba": MambaBlockConfig, "hedgemamba.kernel_backend": str})
    return sections


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, choices=VARIANTS)
    parser.add_argument("--student", required=True, help="model to fine-tune (hedgemamba-init or hedgehog-match "
                                                          "output), or for --variant random the teacher")
    parser.add_argument("--data", required=True, help="synth-text dataset directory")
    parser.add_argument("--decays", required=True, help="decays.json to write (Λ and Δ per layer and head)")
    add_output_arguments(parser)


def budget_steps(match: TrainConfig, finetune: TrainConfig) -> int:
    """Stage 2's steps plus stage 1's, in stage 2's rows per step: the random control's equal budget of rows."""
    rows = match.steps * match.batch_size * match.grad_accum
    return finetune.steps + math.ceil(rows / (finetune.batch_size * finetune.grad_accum))


def frozen(name: str, freeze: str) -> bool:
    """The embeddings stay the teacher's: the input embedding, and the untied output one unless ``input_embedding``."""
    return name.startswith("model.embed_tokens.") or (freeze == "embeddings" and name.startswith("lm_head."))


def unlock(student, cfg: FinetuneConfig) -> None:
    """Stage 2's trainable set: all but the embeddings; each block's Λ and Δ bias with their own AdamW settings
    (``cfg.decay_lr_scale``, eps 1e-20, no weight decay), so the ~1e-12 gradients they get at the exact init move
    them."""
    from ...train.trainable import set_optimizer, train_only

    train_only(student, lambda name: not frozen(name, cfg.freeze))
    for name, param in student.named_parameters():
        if name.endswith((".mamba.A_log", ".mamba.dt_bias")):
            set_optimizer(param, lr_scale=cfg.decay_lr_scale, eps=1e-20, weight_decay=0.0)


def decays(model) -> list[dict]:
    """Per HedgeMamba layer: its heads' A_log, dt_bias and half-life in tokens at the input-independent Δ."""
    import math

    import torch.nn.functional as F

    out = []
    for index, layer in enumerate(model.model.layers):
        if layer.kind != "hedgemamba":
            continue
        a_log, dt_bias = layer.mamba.A_log.detach().double().cpu(), layer.mamba.dt_bias.detach().double().cpu()
        rate = a_log.exp() * F.softplus(dt_bias)
        out.append({"layer": index, "A_log": a_log.tolist(), "dt_bias": dt_bias.tolist(),
                    "half_life": (math.log(2) / rate).tolist()})
    return out


def run(args: argparse.Namespace, sections) -> None:
    from ...io import atomic_write_json
    from ...models.convert.hedgemamba import hedgehog_from_teacher, hedgemamba_from_hedgehog, random_mamba_from_teacher
    from ...train.objectives import build_objective

    cfg = sections.get("hedgemamba.finetune")
    train_cfg = cfg.train
    if args.variant in FROM_TEACHER:
        steps = budget_steps(sections.get("hedgemamba.match.train"), train_cfg)
        train_cfg = dataclasses.replace(train_cfg, steps=steps)
    at_init: list[dict] = []

    def setup(env):
        data = TextData.load(args.data)
        if args.variant in FROM_TEACHER:
            teacher, mamba = data.model(args.student, load_saved), sections.get("hedgemamba.mamba")
            options = {"hedgehog": sections.get("hedgemamba.hedgehog"),
                       "kernel_backend": sections.get("hedgemamba.kernel_backend")}
            if args.variant == "random":
                student = random_mamba_from_teacher(teacher, seed=train_cfg.seed, mamba=mamba, **options)
            else:
                copied = hedgehog_from_teacher(teacher, seed=train_cfg.seed, **options)
                student = hedgemamba_from_hedgehog(copied, mamba)
        else:
            student = data.model(args.student, load_saved)
        unlock(student, cfg)
        at_init[:] = decays(student)
        return Setup(student, data.tokenizer, build_objective("ce"), data.step_batches(train_cfg, env))

    def finish(model, tracker):
        atomic_write_json(args.decays, {"variant": args.variant, "init": at_init, "trained": decays(model)})

    run_training("hedgemamba-finetune", __name__, args, sections, train_cfg, setup,
                 inputs=[args.student, args.data], tags={"relin.variant": args.variant}, finish=finish,
                 outputs=[args.decays])
