"""``relin opal-offpolicy --phase short|long|matched|teacher``: OPAL stage 2A / 2B, all parameters distilled
on the dataset's text against the frozen teacher (``kd``, chunked vocabulary), the context capped by the
phase's curriculum (the lengths of the rows each drew, by power-of-two bin, go into its budget: ``row_lengths``);
and the two controls of Table 3, each continuing stage 2B with stage 3's budget (``--budget``: stage 3's
``train_metrics.json``):

- ``matched``: dataset text, as many optimizer steps as stage 3 and, step by step, as many teacher-scored
  tokens (the rows a step draws, the last cut to fit);
- ``teacher``: the teacher's own continuations of the prompts stage 3 drew, at stage 3's horizon of each step
  (sequence-level distillation on teacher traces), scored at the continuation tokens.

Every phase's ``train_metrics.json`` also holds its per-token KL to the teacher on the teacher's continuations of the
held-out prompts of the exact-match families, the walks (:mod:`._continuation_kl`).
"""
from __future__ import annotations

import argparse
import dataclasses

from ...config.opal import OffPolicyConfig, OnPolicyConfig
from ...models.saved import load_saved
from .._training import Setup, TextData, add_distillation_arguments, held_out, run_training

CONTROLS = ("matched", "teacher")


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    own = {f"opal.offpolicy_{args.phase}": OffPolicyConfig, "opal.niah_protocol": str}
    return {**own, "opal.onpolicy": OnPolicyConfig} if args.phase == "teacher" else own


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", required=True, choices=("short", "long", *CONTROLS))
    parser.add_argument("--budget", help="matched, teacher: stage 3's train_metrics.json (its budget)")
    add_distillation_arguments(parser, student="the previous stage's model directory")
    parser.add_argument("--continuations", required=True,
                        help="the teacher's continuations of the held-out prompts (relin opal-teacher-continuations)")


def read_budget(path: str | None) -> dict:
    """Stage 3's exact budget from its ``train_metrics.json``; one line naming the file when it lacks one."""
    from ...errors import InputError
    from ...io import read_json

    if not path:
        raise InputError("--budget: the controls need stage 3's train_metrics.json")
    budget = read_json(path, "a train_metrics.json of relin opal-onpolicy").get("budget", {})
    missing = [k for k in ("optimizer_steps", "targets_per_step", "horizons") if k not in budget]
    if missing:
        raise InputError(f"{path}: its budget lacks {', '.join(missing)} (expected a train_metrics.json of relin "
                         f"opal-onpolicy)")
    return budget


def run(args: argparse.Namespace, sections) -> None:
    from ...train.objectives import Distillation
    from ...train.teacher import FrozenTeacher

    cfg = sections.get(f"opal.offpolicy_{args.phase}")
    without = held_out(sections.get("opal.niah_protocol"))
    train_cfg, budget = cfg.train, None
    if args.phase in CONTROLS:
        budget = read_budget(args.budget)
        steps = budget["optimizer_steps"]
        train_cfg = dataclasses.replace(train_cfg, steps=steps, warmup_steps=min(train_cfg.warmup_steps, steps),
                                        grad_accum=1)

    held = {}

    def setup(env):
        data = TextData.load(args.data)
        teacher = FrozenTeacher(data.model(args.teacher, load_saved))
        student = data.model(args.student, load_saved)
        held.update(teacher=teacher.module, tokenizer=data.tokenizer)
        if args.phase == "teacher":
            from ...train.curriculum import ReplayedHorizons
            from ...train.rollouts import stage3_rollouts

            traces = stage3_rollouts(teacher.module, data.prompts(), data.tokenizer, sections.get("opal.onpolicy"),
                                     ReplayedHorizons(budget["horizons"]), env, without)
            return Setup(student, data.tokenizer, Distillation(teacher, cfg.divergence, positions="labels"), traces)
        batches = data.step_batches(train_cfg, env, without)
        if args.phase == "matched":
            from ...train.batching import TargetBudget

            batches = TargetBudget(batches, budget["targets_per_step"])
        else:
            from ...train.batching import RowLengths

            batches = RowLengths(batches, train_cfg.steps, train_cfg.grad_accum)
        return Setup(student, data.tokenizer, Distillation(teacher, cfg.divergence), batches)

    inputs = [args.teacher, args.student, args.data, args.continuations, *([args.budget] if args.budget else [])]
    def finish(model, tracker) -> dict:
        from ._continuation_kl import measured

        return measured(held["teacher"], model, args.data, held["tokenizer"], args.continuations)

    run_training("opal-offpolicy", __name__, args, sections, train_cfg, setup, inputs=inputs,
                 tags={"relin.phase": args.phase}, finish=finish)
