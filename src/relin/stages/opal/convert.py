"""``relin opal-convert``: a trained Qwen3 teacher converted to OPAL's hybrid (``--mixer gdn``: the
non-kept layers become Gated DeltaNet) or to the SWA(window, sinks) baseline (``--mixer swa``);
see :mod:`relin.models.convert.opal`. No training: the output is the converted model."""
from __future__ import annotations

import argparse

from ...config.opal import GDNConfig, SWAConfig

# What a conversion reads of ``opal``: its layer pattern and its own mixer's options, so that a change
# to a training stage (or to the other mixer) does not redo it.
PATTERN = {"opal.keep_every": int, "opal.attention_layers": list[int], "opal.kernel_backend": str}


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {**PATTERN, f"opal.{args.mixer}": {"gdn": GDNConfig, "swa": SWAConfig}[args.mixer]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--teacher", required=True, help="teacher model directory (relin teacher-lm)")
    parser.add_argument("--mixer", required=True, choices=("gdn", "swa"), help="what replaces the converted layers")
    parser.add_argument("--out", required=True, help="model directory to write")


def mixer_types(keep_every: int, attention_layers: list[int], num_layers: int, replacement: str) -> list[str]:
    from ...models.convert.opal import kept_attention_layers

    kept = kept_attention_layers(num_layers, keep_every, attention_layers)
    return ["attention" if i in kept else replacement for i in range(num_layers)]


def run(args: argparse.Namespace, sections) -> None:
    from transformers import AutoTokenizer

    from ...models.convert.opal import convert
    from ...models.teachers import load_pretrained
    from ...tracking import stage_run
    from .._training import write_model

    mixer = sections.get(f"opal.{args.mixer}")
    with stage_run("opal-convert", sections.raw, inputs=[args.teacher], outputs=[args.out]) as tracker:
        teacher = load_pretrained(args.teacher)
        types = mixer_types(sections.get("opal.keep_every"), sections.get("opal.attention_layers"),
                            teacher.config.num_hidden_layers, args.mixer)
        student = convert(teacher, types, kernel_backend=sections.get("opal.kernel_backend"), **{args.mixer: mixer})
        tracker.set_tags({"relin.mixer": args.mixer, "relin.mixer_types": ",".join(types)})
        tracker.log_params({"num_parameters": sum(p.numel() for p in student.parameters()),
                            "teacher_parameters": sum(p.numel() for p in teacher.parameters())})
        write_model(args.out, student, AutoTokenizer.from_pretrained(args.teacher, local_files_only=True))
