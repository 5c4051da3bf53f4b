"""The paper config, offline: the papers' checkpoint ids resolve to tiny stand-ins of their real classes in a local
Hugging Face cache (tests/fake_hub.py), and every kind of stage of the three papers runs on them under a few-step
overlay. What a researcher relies on there: the tasks are tokenized by each teacher's own tokenizer, the students
carry it, and the VLM keeps its chat LLM's template with ``<image>`` added.

One chain per paper (one variant of each training and evaluation stage, not every variant): the whole paper DAG
holds 58 jobs (about 7 minutes here), the same rules as these with other wildcards.
"""
from __future__ import annotations

import json

import pytest

from .conftest import SMOKE, copy_repository, snakemake

pytestmark = pytest.mark.slow

PAPER, OFFLINE = "workflow/configs/paper.yaml", "tests/workflow/paper_offline.yaml"
# hybrid_speed and mme_text read a teacher and a chat LLM as the stages here do; the smoke DAG runs them
TARGETS = ("results/eval/opal-onpolicy/metrics.json", "results/eval/hedgemamba-finetune/metrics.json",
           "results/lia_mtr/mme/lia_mtr/metrics.json")


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    from ..fake_hub import populate

    root = tmp_path_factory.mktemp("paper")
    populate(root / "hub", root / "checkpoints")
    repo = copy_repository(root / "repo")
    proc = snakemake(repo, *TARGETS, overlays=(PAPER, SMOKE, OFFLINE), HF_HUB_CACHE=str(root / "hub"))
    return repo, root / "hub", proc


def test_every_stage_runs_on_the_papers_checkpoints_offline(paper_run):
    repo, _, proc = paper_run
    for target in TARGETS:
        assert (repo / target).is_file(), target
    log = proc.stdout + proc.stderr
    for rule in ("synth_text_checkpoint", "teacher_lm", "opal_convert", "opal_align", "opal_offpolicy",
                 "opal_onpolicy", "hedgehog_match", "hedgemamba_init", "hedgemamba_finetune",
                 "vision_tower", "clip_features", "chat_lm", "bridge_align", "bridge_instruct", "eval_mme",
                 "eval_lm"):
        assert f"rule {rule}:" in log, rule
    assert "rule synth_text:" not in log, "no teacher is trained here, so no word-tokenized dataset is made"


def test_students_carry_their_teachers_tokenizer(paper_run, monkeypatch):
    from huggingface_hub import constants

    from relin.data.tokenizer import load_tokenizer

    repo, hub, _ = paper_run
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    for checkpoint, arch, students in (("Qwen/Qwen3-4B", "qwen3", ("opal/gdn", "opal/onpolicy")),
                                       ("EleutherAI/pythia-1b", "gpt_neox", ("hedgemamba/finetune",))):
        original = load_tokenizer(checkpoint)
        data = load_tokenizer(repo / f"results/data/synth_text-{arch}/tokenizer")
        assert data.get_vocab() == original.get_vocab() and data.chat_template == original.chat_template
        for student in (f"teacher/{arch}", *students):
            saved = load_tokenizer(repo / "results" / student / "model")
            assert saved.get_vocab() == original.get_vocab(), student
            assert saved.chat_template == original.chat_template, student
        stats = json.loads((repo / f"results/data/synth_text-{arch}/stats.json").read_text())
        assert stats["vocab_size"] == len(original)


def test_the_vlm_keeps_the_chat_template_and_adds_the_image_token(paper_run, monkeypatch):
    from huggingface_hub import constants

    from relin.data.tokenizer import load_tokenizer
    from relin.models.vlm.model import BridgeVLM

    repo, hub, _ = paper_run
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    original = load_tokenizer("Qwen/Qwen2.5-3B-Instruct")
    for model in ("llm/model", "instruct/lia_mtr/model"):
        saved = load_tokenizer(repo / "results/lia_mtr" / model)
        assert saved.chat_template == original.chat_template, model
        assert "<image>" in saved.get_vocab() and "<image>" not in original.get_vocab()
    vlm = BridgeVLM.from_pretrained(repo / "results/lia_mtr/instruct/lia_mtr/model")
    assert vlm.image_token_id == saved.convert_tokens_to_ids("<image>")
    assert vlm.llm.get_input_embeddings().weight.shape[0] == len(saved)
    mme = json.loads((repo / "results/lia_mtr/mme/lia_mtr/metrics.json").read_text())
    assert {"align", "instruct"} <= set(mme)
