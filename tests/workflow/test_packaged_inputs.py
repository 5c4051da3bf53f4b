"""Checkpoints and prose from packages in the stage graph (``snakemake -n -p``, seconds): a teacher naming a
checkpoints row reads the row's materialised model, which rule pretrained_checkpoint makes, as its weights and as the
tokenizer of its tasks; ``data.text.corpus: prose`` hands the prose corpus to every rule that read real_text's. The
stages themselves run in tests/models/test_pretrained_checkpoint.py and tests/data/test_prose.py."""
from __future__ import annotations

import json
import re
import shlex

from relin.stages import load_stage
from relin.stages.command import stage_parser

from .conftest import copy_repository, overlay, run, snakemake

PACKAGED = {"teacher": {"archs": ["qwen3", "gpt_neox", "smol"],
                        "models": {"smol": {"family": "llama", "checkpoint": "smollm2"}}},
            "data": {"text": {"corpus": "prose"}}}


def _jobs(stdout: str) -> list[dict]:
    """The jobs of a dry run (``-p``): each its rule, inputs and relin command (the words from the stage's name to the
    log redirection)."""
    jobs = []
    for block in re.split(r"^rule ", stdout, flags=re.M)[1:]:
        rule = block.split(":", 1)[0]
        inputs = re.search(r"^\s+input: (.*)$", block, re.M)
        shell = re.search(r"^Shell command: (.*)$", block, re.M)
        words = shlex.split(shell.group(1)) if shell else []
        relin = words[words.index("relin") + 1:words.index(">")] if "relin" in words else []
        jobs.append({"rule": rule, "inputs": inputs.group(1).split(", ") if inputs else [], "command": relin})
    return jobs


def _option(words: list[str], name: str) -> str:
    return words[words.index(name) + 1]


def test_a_checkpoint_teacher_and_the_prose_corpus_wire_the_graph(tmp_path):
    repo = copy_repository(tmp_path / "repo")
    packaged = overlay(tmp_path / "packaged.yaml", PACKAGED)
    proc = snakemake(repo, "results/eval/teacher-smol/metrics.json", "results/teacher/qwen3/model", "-n", "-p",
                     overlays=(packaged,))
    jobs = _jobs(proc.stdout)
    commands: dict[str, list[list[str]]] = {}
    for job in jobs:
        commands.setdefault(job["command"][0], []).append(job["command"])

    (materialise,) = commands["pretrained-checkpoint"]
    assert _option(materialise, "--name") == "smollm2"
    assert _option(materialise, "--out") == "results/pretrained/smollm2"
    teachers = {_option(words, "--arch"): words for words in commands["teacher-lm"]}
    assert _option(teachers["smol"], "--checkpoint") == "results/pretrained/smollm2/model"
    assert _option(teachers["smol"], "--data") == "results/data/synth_text-smol"
    assert "--checkpoint" not in teachers["qwen3"], "a teacher trained in the DAG names no checkpoint"
    renders = {_option(words, "--out"): words for words in commands["synth-text"]}
    smol = renders["results/data/synth_text-smol"]
    assert _option(smol, "--tokenizer") == "results/pretrained/smollm2/model"
    assert _option(smol, "--real-text") == "results/data/prose"
    assert _option(renders["results/data/synth_text"], "--real-text") == "results/data/prose"
    (bpe,) = commands["bpe-tokenizer"]
    assert _option(bpe, "--corpus") == "results/data/prose"
    assert "prose" in commands and "real-text" not in commands, "the prose corpus replaces the real-text one"
    for words in (*commands["pretrained-checkpoint"], *commands["prose"], *commands["teacher-lm"]):
        args = stage_parser(words[0]).parse_args(words[1:])
        assert sorted(json.loads(args.config)) == sorted(load_stage(words[0]).config_sections(args)), words[0]
    inputs = {job["rule"]: job["inputs"] for job in jobs if job["rule"] != "teacher_lm"}
    assert "results/pretrained/smollm2/model" in inputs["synth_text_checkpoint"], "the tokenizer is an input"
    assert {"results/pretrained/smollm2/model", "results/data/synth_text-smol"} == {
        i for job in jobs if job["rule"] == "teacher_lm" and "--checkpoint" in job["command"] for i in job["inputs"]}


def test_the_pretrained_overlay_builds_its_dag(tmp_path):
    """``--configfile workflow/configs/pretrained.yaml`` alone over params.yaml: OPAL's and HedgeMamba's chains on the
    materialised SmolLM2, the report over those two papers, no LIA-MTR job and no teacher trained."""
    repo = copy_repository(tmp_path / "repo")
    proc = run(["snakemake", "-n", "-p", "--cores", "2", "--configfile", "workflow/configs/pretrained.yaml"], repo)
    jobs = _jobs(proc.stdout)
    rules = {job["rule"] for job in jobs}
    assert {"pretrained_checkpoint", "prose", "report"} <= rules
    assert not any(rule.startswith(("lia_mtr", "bridge", "vision")) for rule in rules), sorted(rules)
    commands = [job["command"] for job in jobs if job["command"]]
    (teacher,) = [words for words in commands if words[0] == "teacher-lm"]
    assert _option(teacher, "--checkpoint") == "results/pretrained/smollm2/model"
    stages = {words[0] for words in commands}
    assert {"opal-convert", "opal-align", "hedgemamba-hedgehog-match", "hedgemamba-init"} <= stages, sorted(stages)
