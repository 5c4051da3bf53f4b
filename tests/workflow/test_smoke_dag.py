"""Acceptance tests on one smoke run of the whole DAG: it completes, is then up to date, a changed
parameter reruns exactly its chain (Snakemake and DVC agree), and MLflow holds
the lineage: one parent run, a child per job, each child's inputs with digests and producer runs."""
from __future__ import annotations

import functools
import math
import re
import sys
from pathlib import Path

import pytest
import yaml

from relin.config.hedgemamba import CHAIN as HEDGEMAMBA_CHAIN

from .conftest import clone_run, gen_dvc, overlay, run, snakemake

pytestmark = pytest.mark.slow


def planned_jobs(dry_run_stdout: str) -> set[str]:
    """``rule`` or ``rule[wildcards]`` for every job a ``snakemake -n`` output plans to run."""
    jobs = set()
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", dry_run_stdout):
        head = re.match(r"(?:local)?rule (\w+):", block)
        if head is None or head.group(1) == "all":
            continue
        found = re.search(r"^\s+wildcards: (.+)$", block, re.M)
        # An empty wildcard (``rep=``: the seed of an unreplicated run) names nothing.
        wildcards = [w for w in found.group(1).split(", ") if not w.endswith("=")] if found else []
        jobs.add(f"{head.group(1)}[{', '.join(wildcards)}]" if wildcards else head.group(1))
    return jobs


def test_smoke_dag_runs_end_to_end_and_is_then_up_to_date(smoke_run):
    assert (smoke_run / "results/report/index.html").is_file()
    assert (smoke_run / "mlflow.db").is_file()
    for arch in ("qwen3", "gpt_neox"):
        assert (smoke_run / f"results/eval/teacher-{arch}/metrics.json").is_file()
        assert (smoke_run / f"results/benchmarks/teacher_lm/{arch}.tsv").is_file()
    out = snakemake(smoke_run, "-n").stdout
    assert "Nothing to be done" in out, out
    assert planned_jobs(out) == set()
    # A plain run's config is params.yaml itself, so it recorded its stages in dvc.lock: DVC agrees.
    assert "up to date" in run(["dvc", "status"], smoke_run).stdout


def test_a_plain_run_leaves_the_tree_clean_and_benchmarks_may_measure(smoke_run):
    """Issue #63: dvc.lock records this checkout's runs (DVC without git, the lock git-ignored), so after the run
    `git status` is empty, the envelope reads the tree as its commit, and a report names that commit without "+"."""
    assert (smoke_run / "dvc.lock").is_file()
    assert run(["git", "status", "--porcelain"], smoke_run).stdout == ""
    envelope = run([sys.executable, "-m", "relin.envelope"], smoke_run).stdout
    assert "RELIN_GIT_DIRTY=0" in envelope, envelope
    head = run(["git", "rev-parse", "--short", "HEAD"], smoke_run).stdout.strip()
    assert f"Produced by relin at commit {head} (" in (smoke_run / "results/report/summary.md").read_text()


def test_opal_stages_run_and_reach_the_report(smoke_run):
    import csv
    import json

    from relin.io import read_manifest

    opal = smoke_run / "results/opal"
    for name in ("gdn", "swa", "align", "offpolicy_short", "offpolicy_long", "onpolicy", "offpolicy_matched",
                 "offpolicy_teacher"):
        config = json.loads((opal / name / "model/config.json").read_text())
        assert config["model_type"] == "relin_hybrid", name
        assert (smoke_run / f"results/eval/opal-{name}/metrics.json").is_file(), name
    assert json.loads((opal / "gdn/model/config.json").read_text())["mixer_types"] == ["gdn", "gdn", "gdn",
                                                                                         "attention"]
    history = list(csv.DictReader(open(opal / "onpolicy/history.csv")))
    assert {"kl", "horizon", "kl_at_position/1"} <= set(history[0])
    assert read_manifest(opal / "align/train_metrics.json")["resumed_from"] == 0
    report = (smoke_run / "results/report/summary.md").read_text()
    for heading in ("OPAL Table 4 analogue", "OPAL Table 3 analogue", "OPAL: the paper's claims",
                    "Decode memory, hybrid vs teacher"):
        assert heading in report
    speed = list(csv.DictReader(open(opal / "speed.csv")))
    assert {r["model"] for r in speed} == {"teacher", "hybrid"}
    # DVC-tracked outputs hold what the models determine; timings measure the machine and go to MLflow.
    assert not {"ms_per_step", "tokens_per_s"} & set(speed[0])
    assert (opal / "export/export.json").is_file()


def test_table3_controls_take_the_onpolicy_budget(smoke_run):
    """The matched control: stage 3's optimizer steps and teacher-scored tokens, step by step (the last row of a
    step is cut to fit, so they are equal); the teacher-continuation control: its steps and horizons."""
    import json

    opal = smoke_run / "results/opal"
    budget = {name: json.loads((opal / name / "train_metrics.json").read_text())["budget"]
              for name in ("onpolicy", "offpolicy_matched", "offpolicy_teacher")}
    onpolicy, matched, teacher = budget["onpolicy"], budget["offpolicy_matched"], budget["offpolicy_teacher"]
    assert onpolicy["optimizer_steps"] == matched["optimizer_steps"] == teacher["optimizer_steps"] == 6
    assert matched["targets_per_step"] == onpolicy["targets_per_step"]
    assert matched["target_tokens"] == onpolicy["target_tokens"] == onpolicy["rollout_tokens"] > 0
    assert teacher["horizons"] == onpolicy["horizons"]
    report = (smoke_run / "results/report/summary.md").read_text()
    assert "teacher-scored tokens" in report


OPAL_JOBS = {"opal_convert[model=gdn]", "opal_convert[model=swa]", "opal_convert[model=gdn_kl_guided]",
             "opal_align[model=align]", "opal_align[model=align_kl_guided]", "opal_offpolicy[model=offpolicy_short]",
             "opal_offpolicy[model=offpolicy_long]", "opal_onpolicy[model=onpolicy]",
             "opal_offpolicy[model=offpolicy_matched]", "opal_offpolicy[model=offpolicy_teacher]", "hybrid_speed",
             "opal_export", "report_manifest[paper=opal]", "opal_teacher_continuations",
             *(f"eval_lm[name=opal-{n}]" for n in ("gdn", "swa", "align", "align_kl_guided", "offpolicy_short",
                                                   "offpolicy_long", "onpolicy", "offpolicy_matched",
                                                   "offpolicy_teacher"))}


def _rows(rule):
    return tuple(name for name, step in HEDGEMAMBA_CHAIN.items() if step.rule == rule)


HEDGEMAMBA_STAGE1, HEDGEMAMBA_INITS = _rows("hedgehog_match"), _rows("hedgemamba_init")
HEDGEMAMBA_STAGE2 = _rows("hedgemamba_finetune")
HEDGEMAMBA_MODELS = (*HEDGEMAMBA_STAGE1, *HEDGEMAMBA_STAGE2)
HEDGEMAMBA_FINETUNE_JOBS = {f"hedgemamba_finetune[model={n}]" for n in HEDGEMAMBA_STAGE2}
HEDGEMAMBA_JOBS = {*(f"hedgehog_match[model={n}]" for n in HEDGEMAMBA_STAGE1), "report_manifest[paper=hedgemamba]",
                   *(f"hedgemamba_init[model={n}]" for n in HEDGEMAMBA_INITS),
                   *HEDGEMAMBA_FINETUNE_JOBS, *(f"eval_lm[name=hedgemamba-{n}]" for n in HEDGEMAMBA_MODELS)}


def test_hedgemamba_stages_run_and_reach_the_report(smoke_run):
    import csv
    import json

    root = smoke_run / "results/hedgemamba"
    kinds = {**{n: "hedgemamba" for n in (*HEDGEMAMBA_INITS, *HEDGEMAMBA_STAGE2)},
             **{n: "hedgehog" for n in (*HEDGEMAMBA_STAGE1, "hedgehog_only")}}
    for name, kind in kinds.items():
        config = json.loads((root / name / "model/config.json").read_text())
        assert config["model_type"] == "relin_hybrid" and config["block"] == "gpt_neox", name
        assert set(config["mixer_types"]) == {kind}, name
    for name in HEDGEMAMBA_MODELS:
        assert (smoke_run / f"results/eval/hedgemamba-{name}/metrics.json").is_file(), name
    assert json.loads((root / "init/check.json").read_text())["max_abs_logit_diff"] < 1e-4
    history = list(csv.DictReader(open(root / "hedgehog/history.csv")))
    assert {"attn_kl/layer0", "match_loss/layer0"} <= set(history[0]) and len(history) == 4    # every step
    steps = {name: json.loads((root / name / "train_metrics.json").read_text())["steps"] for name in HEDGEMAMBA_STAGE2}
    assert set(steps.values()) == {4}, steps  # every arm HedgeMamba's all-parameter updates (arm_budget)
    decays = json.loads((root / "finetune/decays.json").read_text())
    start, trained = decays["init"][0]["A_log"][0], decays["trained"][0]["A_log"][0]
    assert start == pytest.approx(-math.log(2), abs=1e-6) and trained != start, "Λ trains in the one AdamW"
    assert json.loads((root / "finetune_decay_group/decays.json").read_text())["init"][0]["A_log"][0] == -20.0
    report = (smoke_run / "results/report/summary.md").read_text()
    for heading in ("HedgeMamba: the paper's claims", "HedgeMamba: teacher, Hedgehog (stage 1)",
                    "Stage 1: attention matching per layer"):
        assert heading in report
    assert "Λ's half-lives per layer" in report
    for figure in ("hedgemamba_matching.png", "hedgemamba_half_lives.png"):
        assert (smoke_run / "results/report/figures" / figure).is_file()


LIA_MTR_BRIDGES = ("lia_mtr", "mlp2x_gelu")   # the smoke overlay's
LIA_MTR_NIAH = ("lia_mtr", "lia_mtr_head_matrix", "mha")
MME_CATEGORIES = {"existence", "count", "position", "color", "scene"}


def test_lia_mtr_stages_run_and_reach_the_report(smoke_run):
    import csv
    import json

    root = smoke_run / "results/lia_mtr"
    assert json.loads((root / "data/stats.json").read_text())["train_images"] == 64
    for stage in ("synth_vision", "vision_tower", "clip_features", "chat_lm", "bridge_memory", "bridge_probe",
                  "mme_probe",
                  *(f"{s}/{b}" for s in ("bridge_align", "bridge_instruct", "eval_mme") for b in LIA_MTR_BRIDGES),
                  *(f"bridge_niah/{b}" for b in LIA_MTR_NIAH)):
        assert (smoke_run / f"results/benchmarks/lia_mtr/{stage}.tsv").is_file(), stage
    for bridge in LIA_MTR_BRIDGES:
        for phase in ("align", "instruct"):
            assert json.loads((root / phase / bridge / "model/bridge.json").read_text())["name"] == bridge
            history = list(csv.DictReader(open(root / phase / bridge / "history.csv")))
            assert {"step", "loss", "accuracy"} <= set(history[0]) and int(history[-1]["step"]) == 3
        metrics = json.loads((root / "mme" / bridge / "metrics.json").read_text())
        assert metrics["bridge"] == bridge
        for phase in ("align", "instruct"):
            assert set(metrics[phase]["tasks"]) == MME_CATEGORIES, (bridge, phase)
            assert {"accuracy", "perception"} <= set(metrics[phase])
            for task in MME_CATEGORIES:      # the official layout: image, question, truth, answer
                lines = (root / "mme" / bridge / "answers" / phase / f"{task}.txt").read_text().splitlines()
                assert lines and all(line.count("\t") == 3 for line in lines), (bridge, phase, task)
    for bridge in LIA_MTR_NIAH:
        rows = list(csv.DictReader(open(root / "niah" / bridge / "niah.csv")))
        assert list(rows[0]) == ["length", "depth", "accuracy", "n"]
        # the grid, then the profile length at the first and last depth
        cells = [(int(r["length"]), float(r["depth"])) for r in rows]
        assert cells == [(n, d) for n in (16, 32, 64) for d in (0.0, 1.0)]
        niah = json.loads((root / "niah" / bridge / "metrics.json").read_text())
        assert niah["bridge"] == bridge and set(niah["state"]) == {"16", "32"}      # Theorem 2: its state per length
    memory = list(csv.DictReader(open(root / "memory/memory.csv")))
    assert list(memory[0]) == ["bridge", "impl", "n", "status", "peak_bytes", "method"]
    assert {r["method"] for r in memory} == {"allocator"}
    assert {(r["bridge"], r["impl"]) for r in memory} == {("lia_mtr", "-"), ("lia_mtr_head_matrix", "-"),
                                                          ("mha", "naive"), ("mha", "sdpa"), ("linear_attn", "-"),
                                                          ("mlp2x_gelu", "-")}
    lemma2 = json.loads((root / "memory/metrics.json").read_text())["lemma2"]
    assert {"head_matrix_error", "map_dimensions", "constant_input_growth"} <= set(lemma2)
    patch_probe = json.loads((root / "mme/patch_probe/metrics.json").read_text())
    assert set(patch_probe["tasks"]) == set(patch_probe["tower"]["tasks"]) == MME_CATEGORIES | {"control"}
    assert {int(r["n"]) for r in memory} == {64, 128}
    probe = json.loads((root / "probe/probe.json").read_text())
    assert {"gate_mean", "gate_std", "half_lives", "mixer_mean"} <= set(probe)
    assert len(probe["half_lives"]) == len(probe["mixer_mean"]) == 2           # the smoke bridge's S
    assert set(probe["bridges"]) == {"lia_mtr"} and len(probe["mixer_per_image"][0]) == 2
    report = (smoke_run / "results/report/summary.md").read_text()
    for heading in ("LIA-MTR: the paper's claims", "LIA-MTR Table I analogue", "LIA-MTR MME-style categories",
                    "LIA-MTR Theorem 2"):
        assert heading in report
    for figure in ("lia_mtr_niah.png", "lia_mtr_niah_depth.png", "lia_mtr_memory.png"):
        assert (smoke_run / "results/report/figures" / figure).is_file()


LIA_MTR_INSTRUCT_JOBS = {*(f"{rule}[bridge={b}]" for rule in ("bridge_instruct", "eval_mme") for b in LIA_MTR_BRIDGES),
                         "bridge_probe"}


@pytest.mark.parametrize("change, expected", [
    ({"teacher": {"train": {"lr": 0.003}}},
     {"teacher_lm[arch=qwen3]", "teacher_lm[arch=gpt_neox]", "eval_lm[name=teacher-qwen3]",
      "eval_lm[name=teacher-gpt_neox]", "report", *OPAL_JOBS, *HEDGEMAMBA_JOBS}),
    ({"teacher": {"models": {"qwen3": {"rope_theta": 20000.0}}}},
     {"teacher_lm[arch=qwen3]", "eval_lm[name=teacher-qwen3]", "report", *OPAL_JOBS}),
    ({"opal": {"onpolicy": {"max_horizon": 16}}},
     {"opal_onpolicy[model=onpolicy]", "opal_offpolicy[model=offpolicy_matched]",
      "opal_offpolicy[model=offpolicy_teacher]", "hybrid_speed", "report_manifest[paper=opal]",
      "opal_export", "eval_lm[name=opal-onpolicy]", "eval_lm[name=opal-offpolicy_matched]",
      "eval_lm[name=opal-offpolicy_teacher]",
      "report"}),
    ({"hedgemamba": {"finetune": {"freeze": "input_embedding"}}},
     {*HEDGEMAMBA_FINETUNE_JOBS, "report", "report_manifest[paper=hedgemamba]",
      *(f"eval_lm[name=hedgemamba-{n}]" for n in HEDGEMAMBA_STAGE2)}),
    ({"lia_mtr": {"instruct": {"train": {"lr": 0.002}}}},
     {*LIA_MTR_INSTRUCT_JOBS, "report_manifest[paper=lia_mtr]", "report"}),
], ids=["teacher.train.lr", "teacher.models.qwen3.rope_theta", "opal.onpolicy.max_horizon",
        "hedgemamba.finetune.freeze", "lia_mtr.instruct.train.lr"])
def test_parameter_change_reruns_only_its_chain(smoke_run, tmp_path, change, expected):
    out = snakemake(smoke_run, "-n", overlays=(overlay(tmp_path / "change.yaml", change),)).stdout
    assert planned_jobs(out) == expected, out
    assert "Params have changed since last execution" in out


def test_dvc_repro_reruns_only_the_changed_chain(smoke_run, tmp_path):
    """A parameter of one stage reruns it and, through its changed output, the report; nothing else."""
    # The copy starts up to date: were it not, `dvc repro` would run more than the three stages asserted below (the
    # smoke run's own `dvc status` is checked in test_smoke_dag_runs_end_to_end_and_is_then_up_to_date).
    repo = clone_run(smoke_run, tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["opal"]["speed"]["batch_size"] += 1  # more rows: more cache bytes in speed.csv
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    out = run(["dvc", "repro"], repo, timeout=1200).stdout
    ran = set(re.findall(r"Running stage '([^']+)'", out))
    skipped = set(re.findall(r"Stage '([^']+)' didn't change, skipping", out))
    assert ran == {"hybrid_speed", "report_manifest-opal", "report"}, out
    assert {"synth_text", "teacher_lm-qwen3", "eval_lm-teacher-qwen3", "opal_onpolicy-onpolicy",
            "hedgemamba_finetune-finetune",
            "bridge_probe"} <= skipped, out
    # Both tools now agree that everything is up to date (params.yaml alone: the smoke overlay would
    # put back the old value).
    assert "Nothing to be done" in run(["snakemake", "-n", "--cores", "2"], repo).stdout
    assert "up to date" in run(["dvc", "status"], repo).stdout
    import json

    # What a user compares: every model's evaluation summary, nothing else.
    metrics = json.loads(run(["dvc", "metrics", "show", "--json"], repo).stdout)[""]["data"]
    assert metrics and all(path.endswith("/metrics.json") for path in metrics), sorted(metrics)
    assert "overall" in metrics["results/eval/teacher-qwen3/metrics.json"]["data"]


@functools.cache
def dag_jobs(root: Path) -> list:
    """``gen_dvc.snakemake_jobs(root)``, built once per run directory: the smoke run's DAG does not change (the tests
    that change a run work on copies), and each build loads the Snakefile and its DAG again (seconds)."""
    return gen_dvc.snakemake_jobs(root)


def test_mlflow_holds_one_parent_run_and_the_lineage_of_every_child(smoke_run):
    from mlflow.tracking import MlflowClient

    from relin.io import digest, read_manifest

    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_run / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("relin")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    parents = [r for r in runs if r.data.tags.get("relin.kind") == "pipeline"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) == len(runs) - 1
    assert {r.info.status for r in children} == {"FINISHED"}
    expected_stages = sorted(gen_dvc.relin_stage(job) for job in dag_jobs(smoke_run))
    assert sorted(r.data.tags["relin.stage"] for r in children) == expected_stages
    names = [r.info.run_name for r in children]
    assert len(set(names)) == len(names), sorted(n for n in names if names.count(n) > 1)
    by_id = {r.info.run_id: r for r in children}

    expected_inputs = {}
    for job in dag_jobs(smoke_run):
        expected_inputs.setdefault(gen_dvc.relin_stage(job), []).append(sorted(map(str, job.input)))
    for child in children:
        stage = child.data.tags["relin.stage"]
        inputs = child.inputs.dataset_inputs
        read = client.get_run(child.info.run_id).inputs.model_inputs  # search_runs leaves model inputs out
        models = [client.get_logged_model(m.model_id) for m in read]
        names = sorted([i.dataset.name for i in inputs] + [m.tags["relin.path"] for m in models])
        assert names in expected_inputs[stage], f"{stage} recorded inputs {names}"
        expected_inputs[stage].remove(names)
        for model in models:
            assert model.source_run_id == read_manifest(smoke_run / model.tags["relin.path"])["run_id"], stage
        for item in inputs:
            path = smoke_run / item.dataset.name
            assert item.dataset.digest == digest(path)[:36], f"{stage}: digest of {item.dataset.name}"
            tags = {t.key: t.value for t in item.tags}
            assert "relin.producer_run_id" in tags, f"{stage}: {item.dataset.name} recorded without its producer"
            producer = by_id[tags["relin.producer_run_id"]]
            assert producer.info.run_id == read_manifest(path)["run_id"]
            assert producer.data.tags["relin.stage"] == tags["relin.producer_stage"]


def test_every_model_written_is_a_logged_model_of_its_run(smoke_run):
    from mlflow.tracking import MlflowClient

    from relin.io import read_manifest
    from relin.stages._training import model_name

    client = MlflowClient(tracking_uri=f"sqlite:///{smoke_run / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("relin")
    assert experiment.tags.get("mlflow.experimentKind") == "custom_model_development"
    models = client.search_logged_models([experiment.experiment_id], max_results=1000)
    by_name = {m.name: m for m in models}
    written = [out for job in dag_jobs(smoke_run) for out in map(str, job.output)
               if out.endswith("/model")]
    assert written and sorted(by_name) == sorted(model_name(out) for out in written)
    for out in written:
        model = by_name[model_name(out)]
        assert model.status == "READY" and model.tags["relin.path"] == out
        assert model.source_run_id == read_manifest(smoke_run / out)["run_id"], out
        outputs = client.get_run(model.source_run_id).outputs.model_outputs
        assert model.model_id in [m.model_id for m in outputs], f"{out}: not an output of its run"
        assert int(model.params["num_parameters"]) > 0 and model.model_type
    trained = by_name[model_name("results/opal/onpolicy/model")]
    assert trained.metrics and {m.dataset_name for m in trained.metrics} == {"results/data/synth_text"}
    assert by_name[model_name("results/opal/export/model")].model_type == "qwen3_5_text"
    # issue #63: a model holds its weights and names the models it was made from
    from mlflow.utils.file_utils import local_file_uri_to_path

    from relin.io import content_files

    for out in written:
        artifacts = smoke_run / local_file_uri_to_path(by_name[model_name(out)].artifact_location)  # relative: kept
        for file in content_files(smoke_run / out):
            assert (artifacts / file.relative_to(smoke_run / out)).read_bytes() == file.read_bytes(), (out, file)
    teacher, gdn = by_name[model_name("results/teacher/qwen3/model")], by_name[model_name("results/opal/gdn/model")]
    assert gdn.tags["relin.parent_models"] == f"{teacher.name} ({teacher.model_id})"
    parents = trained.tags["relin.parent_models"]
    assert f"({by_name[model_name('results/opal/offpolicy_long/model')].model_id})" in parents
    assert f"({teacher.model_id})" in parents, "the teacher it distils from"
