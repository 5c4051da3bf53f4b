"""One CLI entry point per DAG stage: ``relin <stage> ...``.

Stage modules import heavy libraries (torch, transformers) inside ``run`` so that ``relin --help``
stays fast. Each stage module defines ``SECTIONS`` (the dotted config sections it reads and their
config classes), ``add_arguments(parser)``
(its input/output paths and wildcards) and ``run(args, sections)``. The registry maps stage names to
modules; an unknown name is an error listing the known ones.
"""
from __future__ import annotations

import importlib
from types import ModuleType

STAGES: dict[str, tuple[str, str]] = {
    "synth-text": ("relin.stages.synth_text", "generate the synthetic text tasks and tokenizer"),
    "teacher-lm": ("relin.stages.teacher_lm", "build and train one teacher language model"),
    "eval-lm": ("relin.stages.eval_lm", "evaluate a language model: perplexity, accuracy per task and length"),
    "report": ("relin.stages.report", "build the HTML/Markdown report from stage outputs"),
    "opal-convert": ("relin.stages.opal_convert", "OPAL: convert a Qwen3 teacher to a GDN or SWA hybrid"),
    "opal-align": ("relin.stages.opal_align", "OPAL stage 1: align each GDN layer to the teacher's attention"),
    "opal-offpolicy": ("relin.stages.opal_offpolicy", "OPAL stage 2A/2B (and the matched control): logit KD"),
    "opal-onpolicy": ("relin.stages.opal_onpolicy", "OPAL stage 3: on-policy reverse-KL distillation"),
    "hybrid-speed": ("relin.stages.hybrid_speed", "decode memory and throughput of a hybrid vs its teacher"),
    "lm-eval": ("relin.stages.lm_eval", "OPAL: lm-evaluation-harness tasks (GSM8K, MATH-500, ...) on one model"),
    "hedgehog-match": ("relin.stages.hedgehog_match", "HedgeMamba stage 1: Hedgehog attention matching"),
    "hedgemamba-init": ("relin.stages.hedgemamba_init", "HedgeMamba: Hedgehog layers -> HedgeMamba blocks (exact)"),
    "hedgemamba-finetune": ("relin.stages.hedgemamba_finetune", "HedgeMamba stage 2 and its controls: CE fine-tune"),
    "synth-vision": ("relin.stages.synth_vision", "LIA-MTR: draw the scenes, captions, conversations, MME set"),
    "vision-tower": ("relin.stages.vision_tower", "LIA-MTR: train (or load) the CLIP vision tower"),
    "clip-features": ("relin.stages.clip_features", "LIA-MTR: cache the tower's penultimate patch features"),
    "chat-lm": ("relin.stages.chat_lm", "LIA-MTR: train (or load) the chat LLM on the scenes' text"),
    "bridge-align": ("relin.stages.bridge_align", "LIA-MTR phase 1: one bridge alone on captions"),
    "bridge-instruct": ("relin.stages.bridge_instruct", "LIA-MTR phase 2: bridge + LLM on conversations"),
    "eval-mme": ("relin.stages.eval_mme", "LIA-MTR: answer and score the MME-style set after each phase"),
    "mme-text": ("relin.stages.mme_text", "LIA-MTR: the chat LLM answers the MME-style set from captions (reference)"),
    "bridge-niah": ("relin.stages.bridge_niah", "LIA-MTR: bridge-isolated needle in a haystack (Fig. 2)"),
    "bridge-memory": ("relin.stages.bridge_memory", "LIA-MTR: peak forward memory of each bridge against N"),
    "bridge-probe": ("relin.stages.bridge_probe", "LIA-MTR: write-gate statistics and decay half-lives"),
}


def load_stage(name: str) -> ModuleType:
    if name not in STAGES:
        raise KeyError(f"unknown stage {name!r} (expected one of: {', '.join(STAGES)})")
    return importlib.import_module(STAGES[name][0])
