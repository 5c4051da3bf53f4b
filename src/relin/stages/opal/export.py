"""``relin opal-export``: a saved OPAL hybrid -> a ``qwen3_5_text`` checkpoint (``Qwen3_5ForCausalLM``) with its
tokenizer, which stock transformers, vLLM and SGLang load without relin (:mod:`relin.models.export.qwen3_5`).

Refuses, in one line naming each, a hybrid whose options have no counterpart. Before writing, the exported model's
logits are checked against the hybrid's on random token rows (fp32, ``--tolerance``); ``export.json`` records the
mapping and the measured difference.
"""
from __future__ import annotations

import argparse

# Rows of random tokens the export is checked on: enough positions to pass every layer's state through a conv window
# and a few rotary periods, small enough for any CPU.
CHECK_ROWS, CHECK_LENGTH = 2, 48


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="hybrid model directory (e.g. OPAL's last stage)")
    parser.add_argument("--out", required=True, help="qwen3_5_text model directory to write")
    parser.add_argument("--record", required=True, help="export.json to write (mapping and measured difference)")
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest |logit difference| accepted (fp32)")


def run(args: argparse.Namespace, sections) -> None:
    import torch
    from transformers import AutoTokenizer

    from ...errors import InputError
    from ...io import atomic_write_json
    from ...models.export import to_qwen3_5
    from ...models.saved import load_saved
    from ...tracking import stage_run
    from .._training import log_model, write_model

    with stage_run("opal-export", sections.raw, inputs=[args.model], outputs=[args.out, args.record]) as tracker:
        model = load_saved(args.model).to("cpu", torch.float32).eval()
        exported = to_qwen3_5(model)
        ids = torch.randint(0, model.config.vocab_size, (CHECK_ROWS, CHECK_LENGTH),
                            generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            difference = (exported(ids).logits - model(ids).logits).abs().max().item()
        if not difference <= args.tolerance:
            raise InputError(f"export of {args.model}: logits differ by {difference:.2e} from the hybrid's "
                             f"(expected ≤ {args.tolerance:g}); the mapping does not hold for this model")
        tracker.log_metrics({"max_abs_logit_difference": difference})
        tracker.set_tags({"relin.export": "qwen3_5_text"})
        write_model(args.out, exported, AutoTokenizer.from_pretrained(args.model, local_files_only=True))
        log_model(tracker, args.out, exported, metrics={"max_abs_logit_difference": difference}, source=args.model)
        atomic_write_json(args.record, {"source": args.model, "model_type": exported.config.model_type,
                                        "architecture": type(exported).__name__,
                                        "layer_types": exported.config.layer_types,
                                        "checked_rows": CHECK_ROWS, "checked_length": CHECK_LENGTH,
                                        "max_abs_logit_difference": difference})
        print(f"export: {args.model} -> {args.out} (qwen3_5_text, max |Δlogit| {difference:.1e})")
