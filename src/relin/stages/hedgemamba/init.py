"""``relin hedgemamba-init``: the stage-1 Hedgehog model converted to HedgeMamba blocks (seeds/001 eq. 7, App. B;
:func:`relin.models.convert.hedgemamba.hedgemamba_from_hedgehog`). No training; ``--check`` records how far the
converted model's logits are from the Hedgehog model's on the first rows of the dataset (0 up to fp32
rounding when φ sits before RoPE and the conv has no activation; ≤ 1e-4 with the ``near_identity`` decay)."""
from __future__ import annotations

import argparse

from ...config.hedgemamba import MambaBlockConfig
from ...models.saved import load_saved

# The rows checked, each cut to CHECK_LEN tokens, a few at a time (a [rows, T, vocab] logits tensor of a
# checkpoint's vocabulary is gigabytes)
CHECK_ROWS, CHECK_LEN, CHECK_BATCH = 16, 512, 4


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"hedgemamba.mamba": MambaBlockConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--hedgehog", required=True,
                        help="stage-1 Hedgehog model directory (relin hedgemamba-hedgehog-match)")
    parser.add_argument("--data", required=True, help="synth-text dataset directory (rows for the check)")
    parser.add_argument("--out", required=True, help="model directory to write")
    parser.add_argument("--check", required=True, help="JSON to write: the logit gap to the Hedgehog model")


def logit_gap(reference, converted, rows: list[list[int]], pad_id: int) -> dict[str, float]:
    """Max |logit difference| over the real positions of ``rows`` (right-padded, ``CHECK_BATCH`` at a time), and the
    largest |logit|."""
    import torch

    gap, largest, tokens = 0.0, 0.0, 0
    for lo in range(0, len(rows), CHECK_BATCH):
        chunk = rows[lo:lo + CHECK_BATCH]
        width = max(len(r) for r in chunk)
        ids = torch.tensor([r + [pad_id] * (width - len(r)) for r in chunk])
        mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in chunk])
        with torch.no_grad():
            expected = reference.eval()(ids, attention_mask=mask).logits[mask.bool()]
            got = converted.eval()(ids, attention_mask=mask).logits[mask.bool()]
        gap = max(gap, float((got - expected).abs().max()))
        largest, tokens = max(largest, float(expected.abs().max())), tokens + int(mask.sum())
    return {"max_abs_logit_diff": gap, "max_abs_logit": largest, "tokens": tokens}


def run(args: argparse.Namespace, sections) -> None:
    from ...io import atomic_write_json
    from ...models.convert.hedgemamba import hedgemamba_from_hedgehog
    from ...tracking import stage_run
    from .._training import TextData, log_model, write_model

    block = sections.get("hedgemamba.mamba")
    with stage_run("hedgemamba-init", sections.raw, inputs=[args.hedgehog, args.data],
                   outputs=[args.out, args.check]) as tracker:
        data = TextData.load(args.data)
        hedgehog = data.model(args.hedgehog, load_saved)
        # issue #47's decay init, read from the block section once it has the field (today's ``exact`` until then)
        student = hedgemamba_from_hedgehog(hedgehog, block, decay=block.decay_init)
        rows = [row[:CHECK_LEN] for row in data.input_ids.head(CHECK_ROWS)]
        check = logit_gap(hedgehog, student, rows, data.tokenizer.pad_token_id)
        tracker.log_metrics(check)
        tracker.log_params({"num_parameters": sum(p.numel() for p in student.parameters())})
        write_model(args.out, student, data.tokenizer)
        log_model(tracker, args.out, student, metrics=check, dataset=args.data, source=args.hedgehog)
        atomic_write_json(args.check, check)
