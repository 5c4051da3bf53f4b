"""``relin opal-onpolicy``: OPAL stage 3. The student continues dataset prompts with its own samples
(temperature and top-p as configured) through its recurrent cache, the frozen teacher scores every
sampled position, and the loss is the position-wise reverse KL (``onpolicy``); the rollout horizon
doubles when the KL plateaus (:class:`~relin.train.curriculum.HorizonCurriculum`). The horizon, the
KL by position and the log-prob gap between the sampling (recurrent) and training (chunk) paths on the
step's rollouts (``logprob_gap_*``, :mod:`relin.train.objectives.onpolicy`) are logged per step; the per-token KL to
the teacher on its continuations of the held-out walk prompts joins ``train_metrics.json`` (:mod:`._continuation_kl`).
"""
from __future__ import annotations

import argparse

from ...config.opal import OnPolicyConfig
from ...models.saved import load_saved
from .._training import Setup, TextData, add_distillation_arguments, held_out, run_training


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"opal.onpolicy": OnPolicyConfig, "opal.niah_protocol": str}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_distillation_arguments(parser, student="stage 2B's model directory")
    parser.add_argument("--continuations", required=True,
                        help="the teacher's continuations of the held-out prompts (relin opal-teacher-continuations)")


def run(args: argparse.Namespace, sections) -> None:
    from ...train.curriculum import HorizonCurriculum
    from ...train.objectives import OnPolicyDistillation
    from ...train.rollouts import stage3_rollouts
    from ...train.teacher import FrozenTeacher

    cfg = sections.get("opal.onpolicy")
    without = held_out(sections.get("opal.niah_protocol"))

    held = {}

    def setup(env):
        data = TextData.load(args.data)
        student = data.model(args.student, load_saved)
        curriculum = HorizonCurriculum(cfg.initial_horizon, cfg.max_horizon, cfg.plateau_window, cfg.plateau_gain)
        rollouts = stage3_rollouts(student, data.prompts(), data.tokenizer, cfg, curriculum, env, without,
                                   logprobs=True)
        teacher = FrozenTeacher(data.model(args.teacher, load_saved))
        held.update(teacher=teacher.module, tokenizer=data.tokenizer)
        return Setup(student, data.tokenizer, OnPolicyDistillation(teacher, cfg.divergence), rollouts)

    def finish(model, tracker) -> dict:
        from ._continuation_kl import measured

        return measured(held["teacher"], model, args.data, held["tokenizer"], args.continuations)

    run_training("opal-onpolicy", __name__, args, sections, cfg.train, setup,
                 inputs=[args.teacher, args.student, args.data, args.continuations],
                 finish=finish)

