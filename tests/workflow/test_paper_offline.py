"""The paper config, offline: the papers' checkpoint ids resolve to tiny stand-ins of their real classes in a local
Hugging Face cache (tests/fake_hub.py), and every kind of stage of the three papers runs on them under a few-step
overlay, on real-format data: OPAL trains on a JSON-lines corpus, LIA-MTR on LLaVA JSON over an image folder
and is scored on MME's release folders (tests/real_data.py). What a researcher relies on there: the tasks and
the corpus are tokenized by each teacher's own tokenizer, the students carry it, and the VLM keeps its chat
LLM's template with ``<image>`` added.

One chain per paper (one variant of each training and evaluation stage, not every variant; HedgeMamba's stages on the
local Pythia run in tests/train/test_hedgemamba_stages.py, so its chain here stops at the teacher): the whole paper
DAG holds 60 jobs (about 7 minutes here), the same rules as these with other wildcards.
"""
from __future__ import annotations

import json

import pytest
import yaml

from .conftest import SMOKE, copy_repository, snakemake

pytestmark = pytest.mark.slow

PAPER, OFFLINE = "workflow/configs/paper.yaml", "tests/workflow/paper_offline.yaml"
# hybrid_speed and mme_text read a teacher and a chat LLM as the stages here do; the smoke DAG runs them
TARGETS = ("results/eval/opal-onpolicy/metrics.json", "results/teacher/gpt_neox/model",
           "results/lia_mtr/mme/lia_mtr/metrics.json")


@pytest.fixture(scope="module")
def paper_run(tmp_path_factory):
    from ..fake_hub import populate
    from ..real_data import write_corpus, write_llava, write_mme

    root = tmp_path_factory.mktemp("paper")
    populate(root / "hub", root / "checkpoints")
    repo = copy_repository(root / "repo")
    files = {"corpus": {"files": [str(write_corpus(root / "data" / "corpus.jsonl"))], "seq_len": 64, "test_rows": 2},
             "opal": {"train_data": "corpus", "onpolicy": {"prompt_tasks": {"corpus": 1.0, "walk": 0.0}},
                      # the matched control trains on the rows stage 3 prompts: here the corpus's
                      "offpolicy_matched": {"train": {"task_weights": {"walk": 0.0}}}},
             "lia_mtr": {"source": "llava", "llava": {**write_llava(root / "data" / "llava"), "image_size": 32,
                                                     "mme_folder": write_mme(root / "data" / "mme")}}}
    (root / "real_data.yaml").write_text(yaml.safe_dump(files))
    proc = snakemake(repo, *TARGETS, overlays=(PAPER, SMOKE, OFFLINE, root / "real_data.yaml"),
                     HF_HUB_CACHE=str(root / "hub"))
    return repo, root / "hub", proc


def test_every_stage_runs_on_the_papers_checkpoints_offline(paper_run):
    repo, _, proc = paper_run
    for target in TARGETS:
        assert (repo / target).exists(), target
    log = proc.stdout + proc.stderr
    for rule in ("synth_text_checkpoint", "text_corpus", "llava_data", "teacher_lm", "opal_convert", "opal_align",
                 "opal_offpolicy", "opal_onpolicy", "vision_tower", "clip_features", "chat_lm", "bridge_align",
                 "bridge_instruct", "eval_mme", "eval_lm"):
        assert f"rule {rule}:" in log, rule
    assert "rule synth_text:" not in log, "no teacher is trained here, so no word-tokenized dataset is made"
    assert "rule synth_vision:" not in log


def test_real_format_data_feeds_the_stages(paper_run):
    """OPAL's students trained on the corpus rows (the tasks stay their evaluation); LIA-MTR's phases read LLaVA's
    samples (the text-only one skipped) over one image table, and MME's two layouts gave every question."""
    from relin.data.vision.artifact import VisionData

    repo, _, _ = paper_run
    corpus = json.loads((repo / "results/data/corpus-qwen3/stats.json").read_text())
    assert corpus["seq_len"] == 64 and corpus["test"]["rows"] == 2 and corpus["train"]["rows"] > 10
    history = (repo / "results/opal/align/history.csv").read_text()
    assert history.count("\n") > 1
    data = VisionData.load(repo / "results/lia_mtr/data")
    assert len(data.train["captions"]) == 12 and len(data.train["conversations"]) == 12
    assert data.train["align_images"] == data.train["instruct_images"] == list(range(12))
    assert data.images()["train"].shape == (12, 32, 32, 3)
    questions = data.mme["questions"]
    assert len(questions) == 16 and {q["task"] for q in questions} == {"existence", "scene"}
    mme = json.loads((repo / "results/lia_mtr/mme/lia_mtr/metrics.json").read_text())
    assert set(mme["instruct"]["tasks"]) == {"existence", "scene"}


def test_students_carry_their_teachers_tokenizer(paper_run, monkeypatch):
    from huggingface_hub import constants

    from relin.data.tokenizer import load_tokenizer

    repo, hub, _ = paper_run
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    for checkpoint, arch, students in (("Qwen/Qwen3-4B", "qwen3", ("opal/gdn", "opal/onpolicy")),
                                       ("EleutherAI/pythia-1b", "gpt_neox", ())):
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
