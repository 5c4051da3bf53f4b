"""Pretrained models shipped inside installed registry packages (a ``checkpoints`` row), as transformers models.

A row's weight file is found through the packages' ``RECORD`` (:mod:`relin.packages`; never imported), its
chunks concatenated in order, and its sha256 checked before anything is written. A GGUF file is then read by
transformers' GGUF loader, which dequantizes every tensor to fp32, undoes llama.cpp's q/k permutation and builds
the tokenizer, chat template included, from the file's metadata. The result is the model *as shipped*: its
quantization (Q4_1, Q4_K_M, ...) is baked into the fp32 values, so it is not the original full-precision release,
and the model card written beside it says so.
"""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import InputError
from ..packages import CHUNK, check_digest, installed, parse_requirement, record_file, sha256_of

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from ..config.checkpoints import PackagedCheckpointConfig

GGUF_EXTRA = "pip install -e '.[pretrained]'"
WEIGHTS = "weights.gguf"
# The module each format's reader needs, with the version the [pretrained] extra pins.
READERS = {"gguf": "gguf==0.19.0", "onnx_dinov2": "onnx==1.23.2"}


def verify(name: str, cfg: "PackagedCheckpointConfig") -> list[Path]:
    """The row's weight files, in order, once the pinned packages are installed at their versions and the files'
    concatenation has the pinned sha256; otherwise one line naming what was found, what was expected and
    ``cfg.install``. Reads the files and writes nothing."""
    import importlib.util

    who = f"checkpoints.{name}"
    dists = [installed(spec, who, cfg.install) for spec in cfg.packages]
    paths = [record_file(dists, path, who, cfg.install) for path in cfg.files]
    check_digest(f"{who}: {' + '.join(cfg.files)} ({', '.join(cfg.packages)}) has sha256", sha256_of(paths),
                 cfg.sha256, f"not the pinned weights: reinstall them with {cfg.install}")
    reader = READERS[cfg.format]
    if importlib.util.find_spec(reader.split("==")[0]) is None:
        raise InputError(f"{who}: reading a {cfg.format} file needs the {reader.split('==')[0]} package, which is not "
                         f"installed (expected {reader}: {GGUF_EXTRA})")
    return paths


def assemble(paths: list[Path], folder: Path, name: str = WEIGHTS) -> Path:
    """The weight file as one file ``name`` in ``folder``: a link to a single file, else the chunks concatenated in
    order."""
    target = folder / name
    if len(paths) == 1:
        target.symlink_to(paths[0].resolve())
        return target
    with open(target, "wb") as out:
        for path in paths:
            with open(path, "rb") as chunk:
                shutil.copyfileobj(chunk, out, CHUNK)
    return target


def tensor_types(path: Path) -> dict[str, int]:
    """How many tensors of the GGUF file are stored in each type (``{"Q4_1": 210, "F32": 61, ...}``)."""
    from gguf import GGUFReader

    return dict(sorted(Counter(t.tensor_type.name for t in GGUFReader(str(path)).tensors).items()))


def dequantize(path: Path, who: str) -> tuple["PreTrainedModel", "PreTrainedTokenizerBase"]:
    """The causal LM and tokenizer of the GGUF file at ``path``, in fp32, ready to ``save_pretrained`` (offline,
    no repository code). Raises :class:`InputError` (one line) when transformers cannot read it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    options = {"gguf_file": path.name, "local_files_only": True, "trust_remote_code": False}
    try:
        model = AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=torch.float32, **options)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), **options)
    except (ValueError, KeyError, OSError, ImportError) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise InputError(f"{who}: transformers cannot load this GGUF file ({type(err).__name__}: {first}); expected "
                         f"an architecture its GGUF loader supports (llama, qwen2, ...)") from None
    # The loader marks the model as quantized by gguf and then refuses save_pretrained, though every weight is
    # already a dequantized fp32 tensor: detached from the quantizer it saves as an ordinary model.
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    return model.eval(), tokenizer


def describe(name: str, cfg: "PackagedCheckpointConfig", model: "PreTrainedModel", tokenizer, types: dict) -> dict:
    """What ``source.json`` and the model card record: the row's facts and what was built from it (``tokenizer``
    None for a vision tower)."""
    text = {} if tokenizer is None else {"vocab_size": len(tokenizer), "chat_template": bool(tokenizer.chat_template)}
    return {"name": name,
            "packages": [dict(zip(("package", "version"), parse_requirement(spec))) for spec in cfg.packages],
            "files": list(cfg.files), "sha256": cfg.sha256, "format": cfg.format, "tensor_types": types,
            "licence": cfg.licence, "provenance": cfg.provenance, "install": cfg.install,
            "model": {"class": type(model).__name__, "model_type": model.config.model_type,
                      "parameters": sum(p.numel() for p in model.parameters()), "dtype": "float32", **text}}


CAVEATS = {
    "gguf": "**Quantization.** These weights are the GGUF file's quantized values dequantized to fp32 by transformers' "
            "GGUF loader: the model as the package ships it, not the original full-precision release. Quantization "
            "costs quality, so scores published for the original do not carry over; a student distilled from this "
            "model is measured against this model.",
    "onnx_dinov2": "**Extraction.** These weights are the ONNX graph's fp32 backbone initializers copied into "
                   "transformers' `Dinov2Model` (the graph's decoder dropped); the hidden states match the graph's to "
                   "ONNX Runtime's rounding. It is a self-supervised image encoder, not CLIP: it has no text tower "
                   "and no image-text alignment, so a claim that rests on CLIP's alignment with text cannot be "
                   "tested with it."}


def model_card(facts: dict) -> str:
    """The model directory's README.md: where the weights come from, their licence and the format's caveat."""
    packages = ", ".join(f"`{p['package']}=={p['version']}`" for p in facts["packages"])
    files = " + ".join(f"`{f}`" for f in facts["files"])
    stored = ", ".join(f"{kind} x{count}" for kind, count in facts["tensor_types"].items())
    model = facts["model"]
    vocab = f", {model['vocab_size']:,} tokens" if "vocab_size" in model else ""
    return "\n".join([
        # the model hub's metadata: the licence's SPDX id, in its lower-case spelling
        "---", f"license: {facts['licence'].split(' ')[0].lower()}", f"tags: [relin, {facts['format']}]", "---",
        f"# {facts['name']}", "", facts["provenance"] + ".", "",
        "| | |", "|---|---|",
        f"| packages | {packages} |", f"| weight file | {files} |",
        f"| sha256 of the weight file | `{facts['sha256']}` |",
        f"| format | {facts['format'].upper()} ({stored}) |", f"| licence | {facts['licence']} |",
        f"| model | `{model['class']}`, {model['parameters']:,} parameters, {model['dtype']}"
        f"{vocab}{', chat template' if model.get('chat_template') else ''} |",
        f"| install | `{facts['install']}` |", "",
        CAVEATS[facts["format"]], "",
        "Materialised by `relin pretrained-checkpoint`; `source.json` beside this folder holds the same facts.", ""])
