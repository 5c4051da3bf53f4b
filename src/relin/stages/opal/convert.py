"""``relin opal-convert``: a trained Qwen3 teacher converted to OPAL's hybrid (``--mixer gdn``: the
non-kept layers become Gated DeltaNet) or to the SWA(window, sinks) baseline (``--mixer swa``);
see :mod:`relin.models.convert.opal`. No training: the output is the converted model.

The GDN conversion decides which layers stay attention (``opal.layer_selection``: every keep_every-th, the
listed ones, or KL-guided) and writes ``layers.json``: the kept layers, the selection, and per layer the KL its
conversion alone costs on training rows (scored for every selection, so the report can show what a KL-guided
choice would keep). The SWA conversion makes every layer SWA (``opal.swa.layout: all``, the paper's baseline) or,
as the ``hybrid`` variant, reads those kept layers (``--layers``) and keeps them full attention.
"""
from __future__ import annotations

import argparse

from ...config.opal import GDNConfig, LayerScoringConfig, SWAConfig

# What the GDN conversion reads of ``opal``: its layer choice and its mixer's options (a change to a training
# stage does not redo it); the SWA conversion reads its own options and the GDN conversion's choice.
PATTERN = {"opal.layer_selection": str, "opal.keep_every": int, "opal.attention_layers": list[int],
           "opal.kernel_backend": str, "opal.layer_scoring": LayerScoringConfig}
# Scored rows per forward.
SCORE_BATCH = 16


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    if args.mixer == "swa":
        return {"opal.swa": SWAConfig, "opal.kernel_backend": str}
    return {**PATTERN, "opal.gdn": GDNConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--teacher", required=True, help="teacher model directory (relin teacher-lm)")
    parser.add_argument("--mixer", required=True, choices=("gdn", "swa"), help="what replaces the converted layers")
    parser.add_argument("--data", help="gdn: synth-text dataset directory (the rows the per-layer KL is scored on)")
    parser.add_argument("--layers", help="layers.json of the GDN conversion: the hybrid swa keeps its layers; gdn "
                                         "reuses its per-layer scores (a selection variant) instead of scoring on "
                                         "--data")
    parser.add_argument("--record", required=True, help="layers.json to write (kept layers and their scores)")
    parser.add_argument("--out", required=True, help="model directory to write")


def scoring_batches(data_path: str, pad_id: int, teacher: str, scoring: LayerScoringConfig) -> list[dict]:
    """Up to ``scoring.rows`` training rows (the first of the shuffled split) of at most ``scoring.max_len`` tokens,
    right-padded in batches; the ``teacher`` directory must hold the data's tokenizer."""
    import torch

    from ...data.tokenizer import check_same_tokenizer
    from .._training import TextData

    data = TextData.load(data_path)
    check_same_tokenizer(data.tokenizer, data_path, teacher)
    rows = [row[:scoring.max_len or None] for row in data.input_ids.head(scoring.rows)]
    batches = []
    for lo in range(0, len(rows), SCORE_BATCH):
        chunk = rows[lo:lo + SCORE_BATCH]
        width = max(map(len, chunk))
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(chunk):
            ids[i, :len(row)], mask[i, :len(row)] = torch.tensor(row), 1
        batches.append({"input_ids": ids, "attention_mask": mask})
    return batches


def score_layers(sections, teacher, teacher_dir: str, data_path: str | None) -> list[float]:
    """Every layer's conversion KL on training rows (:func:`~relin.models.convert.opal.layer_conversion_kl`)."""
    from ...devices import compute_device
    from ...errors import InputError
    from ...models.convert.opal import layer_conversion_kl

    if not data_path:
        raise InputError("--data: the GDN conversion scores each layer on training rows (expected a synth-text "
                         "dataset directory, or --layers with a layers.json whose scores to reuse)")
    # Nine forwards of the teacher over the scored rows: on the accelerator when there is one.
    scores = layer_conversion_kl(teacher.to(compute_device()),
                                 scoring_batches(data_path, teacher.config.pad_token_id or 0, teacher_dir,
                                                 sections.get("opal.layer_scoring")),
                                 sections.get("opal.gdn"), kernel_backend=sections.get("opal.kernel_backend"))
    teacher.to("cpu")
    return scores


def choose_layers(sections, num_layers: int, scores: list[float]) -> dict:
    """The layers that stay attention under ``opal.layer_selection``, with every layer's conversion KL."""
    from ...config.opal import kept_attention_layers, kl_guided_layers

    every_n = kept_attention_layers(num_layers, sections.get("opal.keep_every"))
    selection = sections.get("opal.layer_selection")
    kept = {"every_n": every_n,
            "explicit": kept_attention_layers(num_layers, 1, sections.get("opal.attention_layers")),
            "kl_guided": kl_guided_layers(scores, len(every_n))}[selection]
    return {"selection": selection, "kept": kept, "conversion_kl": scores}


def run(args: argparse.Namespace, sections) -> None:
    from transformers import AutoTokenizer

    from ...errors import InputError
    from ...io import atomic_write_json, read_json
    from ...models.convert.opal import convert
    from ...models.teachers import load_pretrained
    from ...tracking import stage_run
    from .._training import log_model, write_model

    inputs = [args.teacher, *(p for p in (args.data, args.layers) if p)]
    with stage_run("opal-convert", sections.raw, inputs=inputs, outputs=[args.out, args.record]) as tracker:
        teacher = load_pretrained(args.teacher)
        earlier = read_json(args.layers, "a layers.json of relin opal-convert --mixer gdn") if args.layers else None
        if args.mixer == "gdn":
            # A selection variant of the same teacher and GDN options reuses the scores instead of recomputing them.
            scores = (earlier["conversion_kl"] if earlier is not None
                      else score_layers(sections, teacher, args.teacher, args.data))
            record = choose_layers(sections, teacher.config.num_hidden_layers, scores)
        elif sections.get("opal.swa").layout == "all":
            record = {"selection": "none (every layer SWA)", "kept": [],
                      "conversion_kl": earlier["conversion_kl"] if earlier is not None else None}
        elif earlier is not None:
            record = earlier
        else:
            raise InputError("--layers: the hybrid SWA layout keeps the GDN conversion's layers (expected its "
                             "layers.json, or opal.swa.layout: all)")
        types = ["attention" if i in record["kept"] else args.mixer for i in range(teacher.config.num_hidden_layers)]
        student = convert(teacher, types, kernel_backend=sections.get("opal.kernel_backend"),
                          **{args.mixer: sections.get(f"opal.{args.mixer}")})
        tracker.set_tags({"relin.mixer": args.mixer, "relin.mixer_types": ",".join(types)})
        tracker.log_params({"num_parameters": sum(p.numel() for p in student.parameters()),
                            "teacher_parameters": sum(p.numel() for p in teacher.parameters()),
                            "kept_layers": ",".join(map(str, record["kept"]))})
        write_model(args.out, student, AutoTokenizer.from_pretrained(args.teacher, local_files_only=True))
        log_model(tracker, args.out, student, source=args.teacher)
        atomic_write_json(args.record, record)
