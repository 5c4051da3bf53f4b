"""The SLURM profile, run: a small DAG goes through snakemake-executor-plugin-slurm against stub ``sbatch`` /
``squeue`` / ``sacct`` / ``scancel`` (tests/workflow/slurm/stub.py) that run each job locally and answer as SLURM
does; every rule is submitted with the resources the rules and the profile declare."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import SMOKE, copy_repository, run

pytestmark = pytest.mark.slow


def test_a_dag_runs_through_the_slurm_executor_with_each_rules_resources(tmp_path):
    from .slurm.stub import install

    repo = copy_repository(tmp_path / "repo")
    state = tmp_path / "slurm"
    install(tmp_path / "bin", state)
    path = os.pathsep.join([str(tmp_path / "bin"), str(Path(sys.executable).parent), os.environ["PATH"]])
    # the word tokenizer and no real-text rows: the teacher's chain is two jobs (each waits out a status poll)
    words = tmp_path / "words.yaml"
    words.write_text(yaml.safe_dump({"data": {"tokenizer": "word", "text": {"train_examples": 0},
                                              "niah": {"families": ["single", "multikey", "multiquery"]}},
                                     "teacher": {"train": {"task_weights": {"text": 0.0}}},
                                     "hedgemamba": {stage: {"train": {"task_weights": {"text": 0.0}}}
                                                    for stage in ("match", "finetune")}}))
    run(["snakemake", "results/teacher/gpt_neox/model", "--workflow-profile", "workflow/profiles/slurm",
         "--configfile", SMOKE, str(words), "--default-resources", "slurm_account=test", "slurm_partition=gpu",
         "--slurm-init-seconds-before-status-checks", "1"], repo, PATH=path)
    assert (repo / "results/teacher/gpt_neox/model/config.json").is_file()
    calls = [json.loads(line) for line in (state / "calls.log").read_text().splitlines()]
    submitted = {next(a for a in c["args"] if a.startswith("rule_")): c["args"] for c in calls
                 if c["command"] == "sbatch" and "--comment" in c["args"]}
    assert set(submitted) >= {"rule_synth_text", "rule_teacher_lm_wildcards_gpt_neox"}, set(submitted)
    teacher = " ".join(submitted["rule_teacher_lm_wildcards_gpt_neox"])
    # the profile's set-resources and set-threads, the rule's gpu=1, the account and partition given
    for expected in ("--mem 64000", "-t 240", "--cpus-per-task=8", "-A test", "-p gpu"):
        assert expected in teacher, (expected, teacher)
    assert "--gpus=1" in teacher or "--gres=gpu:1" in teacher, teacher
    assert "--gpus" not in " ".join(submitted["rule_synth_text"]) and "--mem 2000" in " ".join(
        submitted["rule_synth_text"])
    jobs = [json.loads(p.read_text()) for p in state.glob("[0-9]*.json")]
    assert jobs and all(job["state"] == "COMPLETED" for job in jobs)
