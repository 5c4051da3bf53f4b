"""``relin opal-offpolicy --phase short|long|matched``: OPAL stage 2A / 2B, all parameters distilled
on the dataset's text against the frozen teacher (``kd``, chunked vocabulary), the context capped by
the phase's curriculum; ``matched`` is the Table 3 control: stage 2B continued off-policy for as
many target tokens as stage 3 trained on (``--budget``: stage 3's ``train_metrics.json``)."""
from __future__ import annotations

import argparse
import dataclasses

from ..config.opal import OffPolicyConfig
from ._training import Setup, TextData, add_distillation_arguments, run_training


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {f"opal.offpolicy_{args.phase}": OffPolicyConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--phase", required=True, choices=("short", "long", "matched"))
    parser.add_argument("--budget", help="matched: stage 3's train_metrics.json (its final_generated_tokens)")
    add_distillation_arguments(parser, student="the previous stage's model directory")


def steps_for_budget(batches, tokens: int, grad_accum: int) -> int:
    """Optimizer steps whose micro-batches hold at least ``tokens`` distillation targets (every real
    next token); batches are seeded per step, so these are the batches the run will draw."""
    from ..train.objectives import next_token_mask

    step, seen = 0, 0
    while seen < tokens:
        step += 1
        seen += sum(int(next_token_mask(b, "all").sum()) for b in batches.micro_batches(step, grad_accum))
    return max(step, 1)


def run(args: argparse.Namespace, sections) -> None:
    import json

    from ..errors import InputError
    from ..models.teachers import load_pretrained
    from ..train.objectives import Distillation
    from ..train.teacher import FrozenTeacher

    cfg = sections.get(f"opal.offpolicy_{args.phase}")
    train_cfg = cfg.train
    if args.phase == "matched":
        if not args.budget:
            raise InputError("--budget: the matched control needs stage 3's train_metrics.json")
        budget = int(json.loads(open(args.budget).read()).get("final_generated_tokens", 0))
        data = TextData.load(args.data)
        steps = steps_for_budget(data.step_batches(train_cfg, _rank0()), budget, train_cfg.grad_accum)
        train_cfg = dataclasses.replace(train_cfg, steps=steps, warmup_steps=min(train_cfg.warmup_steps, steps))

    def setup(env):
        data = TextData.load(args.data)
        teacher = FrozenTeacher(load_pretrained(args.teacher))
        return Setup(load_pretrained(args.student), data.tokenizer, Distillation(teacher, cfg.divergence),
                     data.step_batches(train_cfg, env))

    inputs = [args.teacher, args.student, args.data, *([args.budget] if args.budget else [])]
    run_training("opal-offpolicy", __name__, args, sections, train_cfg, setup, inputs=inputs,
                 tags={"relin.phase": args.phase})


def _rank0():
    from ..ranks import DistEnv

    return DistEnv(rank=0, world_size=1, local_rank=0)
