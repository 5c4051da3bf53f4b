"""One CLI entry point per DAG stage: ``relin <stage> ...``.

Stage modules import heavy libraries (torch, transformers) inside ``run`` so that ``relin --help``
stays fast. Each stage module defines ``config_sections(args)`` (the dotted config sections it reads and
their config classes), ``add_arguments(parser)``
(its input/output paths and wildcards) and ``run(args, sections)``. The registry maps stage names to
modules; an unknown name is an error listing the known ones.
"""
from __future__ import annotations

import importlib
from types import ModuleType

STAGES: dict[str, tuple[str, str]] = {
    "synth-text": ("relin.stages.synth_text", "generate the synthetic text tasks and tokenizer"),
    "text-corpus": ("relin.stages.text_corpus", "tokenize and pack a local text corpus (JSON lines or parquet)"),
    "real-text": ("relin.stages.real_text", "the real-text corpus: a pinned release's Python files, digest-checked"),
    "prose": ("relin.stages.prose", "the prose corpus: documents of pinned npm tarballs, digest-checked"),
    "pretrained-checkpoint": ("relin.stages.pretrained_checkpoint",
                              "a pretrained model shipped in installed packages, digest-checked, as safetensors"),
    "bpe-tokenizer": ("relin.stages.bpe_tokenizer", "a byte-level BPE learnt on the real-text corpus, and its rows"),
    "teacher-lm": ("relin.stages.teacher_lm", "build and train one teacher language model"),
    "eval-lm": ("relin.stages.eval_lm", "evaluate a language model: perplexity, accuracy per task and length"),
    "report-manifest": ("relin.stages.report_manifest", "list the stage outputs one paper's report section reads"),
    "report": ("relin.stages.report", "build the HTML/Markdown report from the papers' report manifests"),
    "opal-convert": ("relin.stages.opal.convert", "OPAL: convert a Qwen3 teacher to a GDN or SWA hybrid"),
    "opal-align": ("relin.stages.opal.align", "OPAL stage 1: align each GDN layer to the teacher's attention"),
    "opal-offpolicy": ("relin.stages.opal.offpolicy", "OPAL stage 2A/2B (and the matched control): logit KD"),
    "opal-onpolicy": ("relin.stages.opal.onpolicy", "OPAL stage 3: on-policy reverse-KL distillation"),
    "opal-teacher-continuations": ("relin.stages.opal.teacher_continuations",
                                   "OPAL: the teacher's greedy continuations of the held-out prompts, once"),
    "opal-hybrid-speed": ("relin.stages.opal.hybrid_speed", "decode memory and throughput of a hybrid vs its teacher"),
    "opal-export": ("relin.stages.opal.export",
                    "a saved OPAL hybrid as a qwen3_5_text checkpoint (stock transformers)"),
    "opal-lm-eval": ("relin.stages.opal.lm_eval",
                     "OPAL: lm-evaluation-harness tasks (GSM8K, MATH-500, ...) on one model"),
    "hedgemamba-hedgehog-match": ("relin.stages.hedgemamba.hedgehog_match",
                                  "HedgeMamba stage 1: Hedgehog attention matching"),
    "hedgemamba-init": ("relin.stages.hedgemamba.init", "HedgeMamba: Hedgehog layers -> HedgeMamba blocks (exact)"),
    "hedgemamba-finetune": ("relin.stages.hedgemamba.finetune", "HedgeMamba stage 2 and its controls: CE fine-tune"),
    "lia-mtr-synth-vision": ("relin.stages.lia_mtr.synth_vision",
                             "LIA-MTR: draw the scenes, captions, conversations, MME set"),
    "lia-mtr-llava-data": ("relin.stages.lia_mtr.llava_data",
                           "LIA-MTR: import LLaVA JSON, its images and MME (real data)"),
    "lia-mtr-vision-tower": ("relin.stages.lia_mtr.vision_tower", "LIA-MTR: train (or load) the CLIP vision tower"),
    "lia-mtr-clip-features": ("relin.stages.lia_mtr.clip_features",
                              "LIA-MTR: cache the tower's penultimate patch features"),
    "lia-mtr-chat-lm": ("relin.stages.lia_mtr.chat_lm", "LIA-MTR: train (or load) the chat LLM on the scenes' text"),
    "lia-mtr-bridge-align": ("relin.stages.lia_mtr.bridge_align", "LIA-MTR phase 1: one bridge alone on captions"),
    "lia-mtr-bridge-instruct": ("relin.stages.lia_mtr.bridge_instruct",
                                "LIA-MTR phase 2: bridge + LLM on conversations"),
    "lia-mtr-eval-mme": ("relin.stages.lia_mtr.eval_mme",
                         "LIA-MTR: answer and score the MME-style set after each phase"),
    "lia-mtr-mme-text": ("relin.stages.lia_mtr.mme_text", "LIA-MTR: the chat LLM answers the MME set from captions"),
    "lia-mtr-vlm-photos": ("relin.stages.lia_mtr.vlm_photos",
                           "LIA-MTR: real photos described by a VLM after each phase"),
    "lia-mtr-mme-probe": ("relin.stages.lia_mtr.mme_probe",
                          "LIA-MTR: can one patch's features decide each MME category?"),
    "lia-mtr-bridge-niah": ("relin.stages.lia_mtr.bridge_niah",
                            "LIA-MTR: bridge-isolated needle in a haystack (Fig. 2)"),
    "lia-mtr-bridge-memory": ("relin.stages.lia_mtr.bridge_memory",
                              "LIA-MTR: peak forward memory of each bridge against N"),
    "lia-mtr-bridge-probe": ("relin.stages.lia_mtr.bridge_probe",
                             "LIA-MTR: write-gate statistics and decay half-lives"),
}


def load_stage(name: str) -> ModuleType:
    if name not in STAGES:
        raise KeyError(f"unknown stage {name!r} (expected one of: {', '.join(STAGES)})")
    return importlib.import_module(STAGES[name][0])
