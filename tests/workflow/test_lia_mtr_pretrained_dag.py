"""LIA-MTR's target in the pretrained overlay (``snakemake lia_mtr -n -p --configfile
workflow/configs/pretrained.yaml``, seconds): the chat LLM is the materialised SmolLM2 and the tower the
materialised DINOv2-S, each read through its checkpoints row; every Table I bridge goes through both phases and MME
with three seeds; the caption reference is the same frozen LLM's; real photos are described after each phase. The
stages themselves run in tests/models/test_tower_checkpoint.py, tests/models/test_vlm_chat_template.py and
tests/vlm/test_vlm_photos.py."""
from __future__ import annotations

import json

import yaml

from relin.stages import load_stage
from relin.stages.command import stage_parser

from .conftest import copy_repository, run
from .test_packaged_inputs import _jobs, _option


def test_the_pretrained_overlays_lia_mtr_dag_builds(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    proc = run(["snakemake", "lia_mtr", "-n", "-p", "--cores", "2", "--configfile",
                "workflow/configs/pretrained.yaml"], repo)
    jobs = _jobs(proc.stdout)
    commands: dict[str, list[list[str]]] = {}
    for job in jobs:
        if job["command"]:
            commands.setdefault(job["command"][0], []).append(job["command"])

    assert sorted(_option(words, "--name") for words in commands["pretrained-checkpoint"]) == ["dinov2_s", "smollm2"]
    (llm,) = commands["lia-mtr-chat-lm"]
    (tower,) = commands["lia-mtr-vision-tower"]
    assert _option(llm, "--checkpoint") == "results/pretrained/smollm2/model"
    assert _option(tower, "--checkpoint") == "results/pretrained/dinov2_s/model"
    inputs = {job["rule"]: job["inputs"] for job in jobs if job["rule"] in ("chat_lm", "vision_tower")}
    assert "results/pretrained/smollm2/model" in inputs["chat_lm"]
    assert "results/pretrained/dinov2_s/model" in inputs["vision_tower"]

    overlay = yaml.safe_load((repo / "workflow/configs/pretrained.yaml").read_text())["lia_mtr"]
    params = yaml.safe_load((repo / "params.yaml").read_text())
    seeds = params["seeds"]
    runs = sorted((_option(words, "--bridge"), _option(words, "--out")) for words in commands["lia-mtr-bridge-align"])
    expected = sorted((bridge, f"results/lia_mtr/align/{bridge}{'' if seed == seeds[0] else f'-s{seed}'}/model")
                      for bridge in overlay["bridges"] for seed in seeds)
    assert runs == expected, "every Table I bridge with every seed"
    assert len(commands["lia-mtr-bridge-instruct"]) == len(commands["lia-mtr-eval-mme"]) == len(expected)
    (reference,) = commands["lia-mtr-mme-text"]
    assert _option(reference, "--llm") == "results/lia_mtr/llm/model", "the caption reference is the frozen LLM's"
    for words in (*commands["lia-mtr-chat-lm"], *commands["lia-mtr-vision-tower"],
                  *commands["lia-mtr-bridge-align"][:1]):
        args = stage_parser(words[0]).parse_args(words[1:])
        assert sorted(json.loads(args.config)) == sorted(load_stage(words[0]).config_sections(args)), words[0]
    (photos,) = commands["lia-mtr-vlm-photos"]
    assert _option(photos, "--tower") == "results/lia_mtr/tower/model"
    assert photos[photos.index("--model") + 1:photos.index("--model") + 3] == [
        "align=results/lia_mtr/align/lia_mtr/model", "instruct=results/lia_mtr/instruct/lia_mtr/model"]
    llm_cfg = json.loads(_option(llm, "--config"))["lia_mtr.llm"]
    assert llm_cfg["checkpoint"] == "smollm2" and not llm_cfg["pretrained"]
    (data,) = commands["lia-mtr-synth-vision"]
    assert json.loads(_option(data, "--config"))["lia_mtr.data"]["phrasing"] == "plain", \
        "SmolLM2 reads the captions and questions in English sentences, not the tiny LLM's terse words"
    (manifest,) = [job["inputs"] for job in jobs if job["command"][:1] == ["report-manifest"]
                   and _option(job["command"], "--paper") == "lia_mtr"]
    assert "results/lia_mtr/photos" in manifest, "the report reads the photos the VLM described"
    assert "results/lia_mtr/tower/model" in manifest, "and what the tower is"
