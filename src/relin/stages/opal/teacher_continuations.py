"""``relin opal-teacher-continuations``: the frozen teacher's greedy continuations of the held-out prompts of the
exact-match families, generated once for every OPAL training stage that measures its students' KL to the teacher on
them (:mod:`._continuation_kl`). Generated in fp32, as the stages read them, so each stage's KL is what generating the
continuations in the stage itself gave.

Writes ``teacher_continuations.json``: ``families`` (family -> one token list per test row of the family, in row
order), ``prompts_sha256`` (what the stages check them against) and the teacher and data read.
"""
from __future__ import annotations

import argparse


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--teacher", required=True, help="teacher model directory (frozen)")
    parser.add_argument("--data", required=True, help="synth-text dataset directory (its test split's prompts)")
    parser.add_argument("--out", required=True, help="teacher_continuations.json to write")


def run(args: argparse.Namespace, sections) -> None:
    import sys
    import time

    from ...devices import compute_device
    from ...io import atomic_write_json
    from ...models.saved import load_saved
    from ...tracking import stage_run
    from .._training import TextData
    from ._continuation_kl import prompts_digest, teacher_continuations, test_rows

    with stage_run("opal-teacher-continuations", sections.raw, inputs=[args.teacher, args.data],
                   outputs=[args.out]) as tracker:
        data = TextData.load(args.data)
        teacher = data.model(args.teacher, load_saved).eval().to(compute_device())
        rows = test_rows(args.data)
        start = time.perf_counter()
        families = teacher_continuations(teacher, rows, data.tokenizer.eos_token_id, data.tokenizer.pad_token_id)
        seconds = time.perf_counter() - start
        tokens = sum(len(c) for continued in families.values() for c in continued)
        tracker.log_metrics({"continuation_tokens": tokens, "seconds": seconds})
        atomic_write_json(args.out, {"teacher": args.teacher, "data": args.data, "prompts_sha256": prompts_digest(rows),
                                     "families": families})
        tracker.log_artifact(args.out)
    counts = ", ".join(f"{task} {len(continued)}" for task, continued in families.items()) or "no exact-match family"
    print(f"opal-teacher-continuations: {counts}; {tokens} tokens in {seconds:.1f} s", file=sys.stderr)
