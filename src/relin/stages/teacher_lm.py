"""``relin teacher-lm``: build one teacher from its model config and train it on the synthetic text
tasks (all task families mixed, next-token cross-entropy on the labelled tokens), or resolve a
pretrained checkpoint when the model config names one (``pretrained``: a hub id or path; ``checkpoint``: a
``checkpoints`` row, whose materialised model its rule passes as ``--checkpoint``). Outputs and checkpoints: see
:mod:`relin.stages._training`. Launch with ``torchrun``/``deepspeed`` for several processes.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ..config.teacher import TeacherModelConfig, teacher_train
from ..config.train import TrainConfig
from ..errors import UserError
from ._training import Setup, TextData, add_output_arguments, run_training, write_outputs


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {f"teacher.models.{args.arch}": TeacherModelConfig, "teacher.train": TrainConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", required=True, help="key of teacher.models (e.g. qwen3, gpt_neox)")
    parser.add_argument("--data", required=True, help="synth-text dataset directory (save_to_disk + tokenizer/)")
    parser.add_argument("--checkpoint", default="", help="the model directory of the checkpoints row the model "
                                                         "config names (relin pretrained-checkpoint's model/)")
    add_output_arguments(parser)


def run(args: argparse.Namespace, sections) -> None:
    from ..models.teachers import build_teacher
    from ..train.objectives import build_objective

    model_key = f"teacher.models.{args.arch}"
    model_cfg = sections.get(model_key)
    cfg = teacher_train(sections.get("teacher.train"), model_cfg)
    if bool(model_cfg.checkpoint) != bool(args.checkpoint):
        raise UserError(f"{model_key}.checkpoint: {model_cfg.checkpoint or 'none'}, but --checkpoint "
                        f"{args.checkpoint or 'not given'}; expected --checkpoint with the model directory of the "
                        f"checkpoints row the config names (results/pretrained/<row>/model), and only then")
    if model_cfg.loaded:
        return resolve_pretrained(args, sections, model_cfg.pretrained or args.checkpoint, model_cfg.family)

    def setup(env):
        data = TextData.load(args.data)
        data.check_fits(model_cfg.max_position_embeddings, f"{model_key}.max_position_embeddings")
        model = build_teacher(model_cfg, data.tokenizer, seed=cfg.seed)
        return Setup(model, data.tokenizer, build_objective("ce"), data.step_batches(cfg, env))

    run_training("teacher-lm", __name__, args, sections, cfg, setup, inputs=[args.data],
                 tags={"relin.arch": args.arch})


def resolve_pretrained(args: argparse.Namespace, sections, reference: str, family: str) -> None:
    """The checkpoint named by the config, saved as this stage's model (no training); the data must have been
    rendered with its tokenizer (``relin synth-text --tokenizer``), which is saved with it, and the checkpoint must
    be of the config's ``family``."""
    from ..data.tokenizer import check_same_tokenizer, load_tokenizer
    from ..errors import InputError
    from ..models.teachers import load_pretrained
    from ..tracking import stage_run

    inputs = [args.checkpoint] if args.checkpoint else []  # a materialised row is an artifact of the DAG
    with stage_run("teacher-lm", sections.raw, inputs=inputs,
                   outputs=[args.out, args.history, args.metrics]) as tracker:
        tracker.set_tags({"relin.arch": args.arch, "relin.pretrained": reference})
        check_same_tokenizer(load_tokenizer(Path(args.data) / "tokenizer"), args.data, reference)
        model, tokenizer = load_pretrained(reference), load_tokenizer(reference)
        if model.config.model_type != family:
            raise InputError(f"teacher.models.{args.arch}.family: {family}, but {reference} is a "
                             f"{model.config.model_type} model ({type(model).__name__}); expected the family of the "
                             f"checkpoint it loads")
        write_outputs(args, model, tokenizer, [], {"steps": 0, "pretrained": reference}, tracker)
