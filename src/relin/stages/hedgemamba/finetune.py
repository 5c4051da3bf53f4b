"""``relin hedgemamba-finetune --variant hedgemamba|random|no_match|mamba_in_llama|hedgehog``: HedgeMamba stage 2
(seeds/001 §3.2) and its controls, cross-entropy on the dataset with every parameter but the embeddings trained
(conv, gate, Δ and Λ unlocked). Λ and Δ train with the same AdamW as every other parameter (``model``), or
with their own settings (``decay_group``: ``decay_lr_scale`` × lr, eps 1e-20; :func:`unlock`); the conv's SiLU is
switched on for stage 2 or not (:func:`unlock_conv_activation`):

- ``hedgemamba``: the converted model (``--student``: relin hedgemamba-init's output);
- ``random``: the same HedgeMamba shape with its mixers freshly initialised and everything else the
  teacher's (``--student``: the teacher), trained for stage 1's and stage 2's rows together, the same budget;
- ``no_match``: HedgeMamba without stage 1, the clean ablation of attention matching: the teacher's q/k/v/o copied
  into the same HedgeMamba blocks by the same exact initialisation (eq. 7), with the feature maps at Hedgehog's
  identity init instead of matched ones (``--student``: the teacher), the same budget;
- ``mamba_in_llama``: Mamba-in-the-Llama's initialisation as its authors wrote it
  (:func:`relin.models.convert.mamba_in_llama.mamba_in_llama_from_teacher`: no φ, their Δ/A/D/conv init, Mamba-2's
  gated RMSNorm), the same budget;
- ``hedgehog``: the stage-1 Hedgehog model without conversion (``--student``: relin hedgemamba-hedgehog-match's output).

``decays.json``: per HedgeMamba layer and head, A_log, dt_bias and the half-life ln 2 / (exp(A_log) ·
softplus(dt_bias)) in tokens (at the input-independent Δ), before and after training.
"""
from __future__ import annotations

import argparse
import dataclasses
import math

from ...config.hedgemamba import FinetuneConfig, HedgehogLayerConfig, MambaBlockConfig, stage_rows
from ...config.train import TrainConfig
from ...models.saved import load_saved
from .._training import Setup, TextData, add_output_arguments, run_training

VARIANTS = ("hedgemamba", "random", "no_match", "mamba_in_llama", "hedgehog")
# Variants built from the teacher, trained for stage 1's and stage 2's rows together.
FROM_TEACHER = ("random", "no_match", "mamba_in_llama")
# How Λ (A_log) and Δ's bias (dt_bias) are optimised: as every other parameter, or with their own settings.
DECAY_OPTIMIZERS = ("model", "decay_group")
# The conv's activation in stage 2: the init's (identity, exact) or SiLU (the seed's "original Mamba branches").
CONV_ACTIVATIONS = ("keep", "silu")


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    sections = {"hedgemamba.finetune": FinetuneConfig}
    if args.variant in FROM_TEACHER:
        sections.update({"hedgemamba.match.train": TrainConfig, "hedgemamba.hedgehog": HedgehogLayerConfig,
                         "hedgemamba.mamba": MambaBlockConfig, "hedgemamba.kernel_backend": str})
    return sections


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--variant", required=True, choices=VARIANTS)
    parser.add_argument("--student", required=True, help="model to fine-tune (hedgemamba-init or "
                                                          "hedgemamba-hedgehog-match output), or for --variant random "
                                                          "the teacher")
    parser.add_argument("--data", required=True, help="synth-text dataset directory")
    parser.add_argument("--decays", required=True, help="decays.json to write (Λ and Δ per layer and head)")
    add_output_arguments(parser)


def arm_budget(variant: str, match: TrainConfig, finetune: TrainConfig) -> TrainConfig:
    """Stage 2's training for ``variant`` such that every arm makes the same number of all-parameter optimizer
    updates and reads the same rows (so, on the same data and length curriculum, the same tokens).

    HedgeMamba and ``hedgehog`` read stage 1's rows (φ-only updates) and then make ``finetune.steps``
    all-parameter updates; an arm built from the teacher (:data:`FROM_TEACHER`) makes ``finetune.steps`` updates
    too, each of (stage 1's rows + stage 2's rows) / ``finetune.steps`` rows: the micro-batch is the largest
    divisor of that count not above ``finetune.batch_size``, with as many accumulation steps as it takes
    (matching rows at stage 2's batch would give these arms 1.5x HedgeMamba's all-parameter updates at the
    defaults).

    Raises :class:`~relin.errors.ConfigError` when the rows do not split into ``finetune.steps`` equal updates."""
    from ...errors import ConfigError

    if variant not in FROM_TEACHER:
        return finetune
    rows = stage_rows(match, finetune)
    per_update, rest = divmod(rows, finetune.steps)
    if rest:
        raise ConfigError(f"hedgemamba: the {variant} control cannot read HedgeMamba's {rows} rows (stage 1's "
                          f"{match.steps}x{match.batch_size}x{match.grad_accum} + stage 2's {finetune.steps}x"
                          f"{finetune.batch_size}x{finetune.grad_accum}) in {finetune.steps} equal updates "
                          f"({rows} = {per_update}x{finetune.steps} + {rest}): change a batch size or a step count")
    batch = max(d for d in range(1, min(per_update, finetune.batch_size) + 1) if per_update % d == 0)
    return dataclasses.replace(finetune, batch_size=batch, grad_accum=per_update // batch)


def frozen(name: str, freeze: str) -> bool:
    """The embeddings stay the teacher's: the input embedding, and the untied output one unless ``input_embedding``."""
    return name.startswith("model.embed_tokens.") or (freeze == "embeddings" and name.startswith("lm_head."))


def unlock(student, cfg: FinetuneConfig, decay_optimizer: str = "decay_group") -> None:
    """Stage 2's trainable set: all but the embeddings. ``decay_optimizer``: ``model``, each block's Λ (A_log) and
    Δ bias (dt_bias) in the same AdamW as every other parameter (the seed's; with the ``near_identity`` init their
    gradients sit well above AdamW's eps); ``decay_group``, their own AdamW settings (``cfg.decay_lr_scale`` × lr,
    eps 1e-20, no weight decay), so the ~1e-12 gradients they get at the ``exact`` init move them (a sign-like
    step: the project's recipe, not the seed's)."""
    from ...train.trainable import set_optimizer, train_only

    if decay_optimizer not in DECAY_OPTIMIZERS:
        raise ValueError(f"decay_optimizer {decay_optimizer!r}: expected one of {', '.join(DECAY_OPTIMIZERS)}")
    train_only(student, lambda name: not frozen(name, cfg.freeze))
    if decay_optimizer == "model":
        return
    for name, param in student.named_parameters():
        if name.endswith((".mamba.A_log", ".mamba.dt_bias")):
            set_optimizer(param, lr_scale=cfg.decay_lr_scale, eps=1e-20, weight_decay=0.0)


def unlock_conv_activation(student, activation: str = "keep") -> None:
    """``silu``: SiLU after every HedgeMamba block's conv from now on, in the blocks and in the config a saved model
    is rebuilt from (§3.2's "original Mamba branches" unlocked; the init is exact only without it). ``keep``: the
    blocks as they are."""
    if activation not in CONV_ACTIVATIONS:
        raise ValueError(f"conv activation {activation!r}: expected one of {', '.join(CONV_ACTIVATIONS)}")
    blocks = [layer.mamba for layer in student.model.layers if layer.kind == "hedgemamba"]
    if activation == "keep" or not blocks:
        return
    for block in blocks:
        block.set_conv_activation("silu")
    student.config.hedgemamba = {**student.config.hedgemamba, "conv_activation": "silu"}


def decays(model) -> list[dict]:
    """Per HedgeMamba layer: its heads' A_log, dt_bias and half-life in tokens at the input-independent Δ."""

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
    from ...models.convert.mamba_in_llama import mamba_in_llama_from_teacher
    from ...train.objectives import build_objective

    cfg = sections.get("hedgemamba.finetune")
    decay_optimizer, conv_activation = cfg.decay_optimizer, cfg.conv_activation
    train_cfg = cfg.train
    if args.variant in FROM_TEACHER:
        train_cfg = arm_budget(args.variant, sections.get("hedgemamba.match.train"), train_cfg)
    at_init: list[dict] = []

    def setup(env):
        data = TextData.load(args.data)
        if args.variant in FROM_TEACHER:
            teacher, mamba = data.model(args.student, load_saved), sections.get("hedgemamba.mamba")
            options = {"hedgehog": sections.get("hedgemamba.hedgehog"),
                       "kernel_backend": sections.get("hedgemamba.kernel_backend")}
            if args.variant == "random":
                student = random_mamba_from_teacher(teacher, seed=train_cfg.seed, mamba=mamba,
                                                    stock_conv=conv_activation == "silu", **options)
            elif args.variant == "mamba_in_llama":
                student = mamba_in_llama_from_teacher(teacher, seed=train_cfg.seed, conv_size=mamba.conv_size,
                                                      kernel_backend=options["kernel_backend"])
            else:
                copied = hedgehog_from_teacher(teacher, seed=train_cfg.seed, **options)
                student = hedgemamba_from_hedgehog(copied, mamba, decay=mamba.decay_init)
        else:
            student = data.model(args.student, load_saved)
        unlock(student, cfg, decay_optimizer)
        unlock_conv_activation(student, conv_activation)
        at_init[:] = decays(student)
        return Setup(student, data.tokenizer, build_objective("ce"), data.step_batches(train_cfg, env))

    def finish(model, tracker):
        atomic_write_json(args.decays, {"variant": args.variant, "init": at_init, "trained": decays(model)})

    run_training("hedgemamba-finetune", __name__, args, sections, train_cfg, setup,
                 inputs=[args.student, args.data], tags={"relin.variant": args.variant}, finish=finish,
                 outputs=[args.decays])
