"""The generated files are current, every rule passes exactly its stage's config sections, and the
Snakefile refuses a bad params.yaml with one line before anything runs."""
from __future__ import annotations

import json
import shlex

import pytest

from .conftest import ROOT, console_lines, copy_repository, gen_dvc, overlay, snakemake

# Table I's bridges, as the h200 overlay lists them (the default trains none)
TABLE_1 = ["lia_mtr", "lia_mtr_head_matrix", "mlp2x_gelu", "lia_mtr_no_gate", "lia_mtr_one_scale"]


def test_params_schema_is_current():
    from relin.pipeline.schema import schema_text

    assert (ROOT / "workflow/schemas/params.schema.yaml").read_text() == schema_text(), \
        "params.schema.yaml is stale: run `relin schema`"


@pytest.fixture(scope="module")
def generated_dvc_yaml() -> str:
    """dvc.yaml as gen_dvc.py writes it from this checkout (builds the Snakemake DAG: seconds)."""
    return gen_dvc.dvc_yaml(ROOT)


def test_dvc_yaml_is_current(generated_dvc_yaml):
    assert (ROOT / "dvc.yaml").read_text() == generated_dvc_yaml, \
        "dvc.yaml is stale: run `python workflow/scripts/gen_dvc.py`"


def test_every_rule_passes_exactly_the_sections_its_stage_reads():
    from relin.stages import load_stage
    from relin.stages.command import stage_parser

    jobs = gen_dvc.snakemake_jobs(ROOT)
    assert {job.rule.name for job in jobs} >= {"synth_text", "teacher_lm", "eval_lm", "report"}
    for job in jobs:
        words = shlex.split(job.shellcmd)
        argv = words[words.index("relin") + 1:words.index(">")]
        args = stage_parser(argv[0]).parse_args(argv[1:])
        declared = load_stage(argv[0]).config_sections(args)
        assert sorted(json.loads(args.config)) == sorted(declared), f"rule {job.rule.name} ({job.wildcards_dict})"


def test_dvc_stages_mirror_the_snakemake_jobs(generated_dvc_yaml):
    import yaml

    stages = yaml.safe_load(generated_dvc_yaml)["stages"]
    outs = [next(iter(o)) if isinstance(o, dict) else o
            for stage in stages.values() for key in ("outs", "metrics", "plots") for o in stage.get(key, [])]
    assert len(outs) == len(set(outs)), "two DVC stages declare the same output"
    teacher = stages["teacher_lm-qwen3"]
    assert teacher["params"] == ["teacher.models.qwen3", "teacher.train"]
    code = {"src/relin/stages/teacher_lm.py", "src/relin/train/loop.py", "src/relin/pipeline/codedeps.py"}
    assert code <= set(teacher["deps"])
    assert not any(dep.startswith(("src/relin/eval", "src/relin/report")) for dep in teacher["deps"]), \
        "a teacher stage depends only on the code it runs"
    assert {d for d in teacher["deps"] if d.startswith("src/relin/data")} == {
        "src/relin/data/__init__.py", "src/relin/data/loaders.py", "src/relin/data/token_rows.py",
        "src/relin/data/tokenizer.py"}, \
        "the loaders and the tokenizer, not the generators"
    assert teacher["cmd"].startswith("relin run-job teacher_lm results/teacher/qwen3/model ")
    assert all(spec == {"persist": True} for key in ("outs", "metrics", "plots") for out in teacher.get(key, [])
               for spec in out.values()), "DVC must never delete an output Snakemake may be reading"


def test_dry_run_creates_nothing(tmp_path):
    repo = copy_repository(tmp_path)
    before = set(repo.iterdir())
    out = snakemake(repo, "-n")
    assert "report" in out.stdout
    created = {p.name for p in set(repo.iterdir()) - before} - {".snakemake"}
    assert not created, f"a dry run created {sorted(created)}"


# One case per place a bad value can come from (params.yaml, a missing or empty params.yaml, an overlay,
# --config): each ends the run in one line before anything is touched. The checks themselves (types, ranges,
# cross-section rules) are tested in-process in tests/core/test_config.py.
BAD_PARAMS = {
    "unknown key": ("params", ("  train:\n    steps:", "  train:\n    stepz:"),
                    "params.yaml: teacher.train.stepz: unknown key"),
    "missing params.yaml": ("params", None, "params.yaml: config file not found"),
    "empty params.yaml": ("params", "", "params.yaml: empty (expected a mapping of config sections"),
    "bad overlay value": ("overlay", {"teacher": {"archs": ["llama"]}},
                          "bad.yaml: teacher.archs: 'llama' is not a key of teacher.models"),
    "bad --config": ("config", "teacher={train: {lr: .inf}}",
                     "--config: teacher.train.lr: expected a finite number, got inf"),
    "--configfile twice": ("twice", {"report": {"title": "x"}},
                           "--configfile: given more than once, and Snakemake keeps only the last"),
    # issue #46: faults found late or never
    "key twice in params.yaml": ("params", ("  train:\n    steps:", "  train:\n    steps: 3\n    steps:"),
                                 "teacher.train.steps given twice (first at line "),
    "key twice in an overlay": ("overlay text", "opal:\n  keep_every: 2\n  keep_every: 4\n",
                                "bad.yaml: line 3: opal.keep_every given twice (first at line 2)"),
    "bad value under a later overlay": ("overlays", [{"teacher": {"train": {"steps": "many"}}},
                                                     {"teacher": {"train": {"steps": 5}}}],
                                        "bad.yaml: teacher.train.steps: expected an integer, got 'many'"),
    "task typo in --config": ("config", "teacher={train: {task_weights: {mqr: 1}}}",
                              "--config: teacher.train.task_weights: 'mqr' is not a task of the rows this stage "
                              "trains on"),
    "export option": ("overlay", {"opal": {"gdn": {"allow_neg_eigval": True}}},
                      "bad.yaml: opal.gdn.allow_neg_eigval: true cannot be exported by opal_export"),
}


@pytest.mark.parametrize("case", list(BAD_PARAMS))
def test_bad_params_give_one_line_and_touch_nothing(tmp_path, case):
    repo = copy_repository(tmp_path)
    existing = {repo / "results/teacher/qwen3/history.csv": "step,loss\n1,2.0\n",
                repo / "results/report/index.html": "<html>earlier report</html>\n"}
    for path, text in existing.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    params = repo / "params.yaml"
    kind, change, expected = BAD_PARAMS[case]
    overlays, args = (), ()
    if kind == "params" and change is None:
        params.unlink()
    elif kind == "params" and change == "":
        params.write_text("# everything commented out\n")
    elif kind == "params":
        params.write_text(params.read_text().replace(*change, 1))
    elif kind == "overlay":
        overlays = (overlay(tmp_path / "bad.yaml", change),)
    elif kind == "overlay text":
        (tmp_path / "bad.yaml").write_text(change)
        overlays = (tmp_path / "bad.yaml",)
    elif kind == "overlays":
        overlays = (overlay(tmp_path / "bad.yaml", change[0]), overlay(tmp_path / "later.yaml", change[1]))
    elif kind == "twice":
        args = ("--configfile", str(overlay(tmp_path / "a.yaml", change)), "--configfile",
                str(overlay(tmp_path / "b.yaml", change)))
    else:
        args = ("--config", change)
    proc = snakemake(repo, *args, overlays=overlays, check=False)
    assert proc.returncode != 0
    lines = console_lines(proc)
    assert len(lines) == 1 and lines[0].startswith("relin: ") and expected in lines[0], lines
    for path, text in existing.items():
        assert path.read_text() == text
    assert not (repo / "mlflow.db").exists() and not (repo / "logs").exists()


@pytest.mark.parametrize("readonly", ["results", "results/teacher/qwen3"])
def test_unwritable_results_stop_the_run_in_one_line_before_any_job(tmp_path, readonly):
    """A read-only output directory ends the run before its first job with one line naming it (not a job's
    failure as Snakemake prepares it, after the MLflow run began). Root writes anywhere: as root the run drops the
    capabilities that let it (setpriv), as a user would run it."""
    import os
    import shutil
    import subprocess

    from .conftest import SMOKE, workflow_env

    drop = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root ignores file modes, and setpriv (util-linux) is not here to drop that")
        drop = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]
    repo = copy_repository(tmp_path)
    (repo / readonly).mkdir(parents=True)
    (repo / readonly).chmod(0o555)
    try:
        proc = subprocess.run([*drop, "snakemake", "results/eval/teacher-qwen3/metrics.json", "--cores", "2",
                               "--configfile", SMOKE], cwd=repo, env=workflow_env(), capture_output=True, text=True,
                              timeout=600)
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0, output
        ours = [line for line in output.splitlines() if line.startswith("relin")]
        assert len(ours) == 1 and ours[0].startswith(f"relin: {readonly}/: not writable by this user, and the DAG "
                                                     f"writes results/"), output
        assert "Traceback" not in output and "Error" not in output, output
        assert not any(line.startswith(("rule ", "localrule ")) for line in output.splitlines()), "a job started"
        assert not (repo / "logs").exists() and not (repo / "mlflow.db").exists(), "a job or the tracking ran"
    finally:
        (repo / readonly).chmod(0o755)


def test_typed_config_override_reaches_the_stage(tmp_path):
    repo = copy_repository(tmp_path)
    out = snakemake(repo, "-n", "-p", "--config", "teacher={train: {lr: 0.003}}").stdout
    assert '"lr": 0.003' in out and '"lr": "0.003"' not in out, out


def test_every_declared_model_is_a_dag_target_and_a_report_input():
    """A paper's table in config/<paper>.py is the one place a model is declared: each is built by a job, scored,
    and read by the report."""
    from relin.config.hedgemamba import MODELS as HEDGEMAMBA
    from relin.config.opal import MODELS as OPAL
    from relin.config.params import load_params

    jobs = gen_dvc.snakemake_jobs(ROOT)
    built = {str(path) for job in jobs for path in job.output}
    report = {str(path) for job in jobs if job.rule.name == "report_manifest" for path in job.input}
    params = load_params(ROOT / "params.yaml")
    for paper, models in (("opal", OPAL), ("hedgemamba", HEDGEMAMBA)):
        rows = getattr(params, paper).rows
        for name in (m for m in models if not rows or m in rows):
            assert f"results/{paper}/{name}/model" in built, (paper, name)
            assert {f"results/eval/{paper}-{name}/metrics.json", f"results/eval/{paper}-{name}/items.csv"} <= report
    for bridge in load_params(ROOT / "params.yaml").lia_mtr.bridges:
        assert f"results/lia_mtr/instruct/{bridge}/model" in built, bridge
        assert f"results/lia_mtr/mme/{bridge}/items.csv" in report, bridge


def test_seeds_replicate_the_student_stages_with_their_seed(tmp_path):
    """``seeds: [0, 3]`` with every model listed as replicated adds a replica of every student stage (OPAL's
    stages and controls, HedgeMamba's, the LIA-MTR bridges), trained with train.seed 3, scored and read by the
    report; teachers and conversions are shared."""
    import yaml

    from relin.config.hedgemamba import MODELS as HEDGEMAMBA_MODELS
    from relin.config.opal import TRAINED

    repo = copy_repository(tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["opal"]["replicated"], params["hedgemamba"]["replicated"] = list(TRAINED), list(HEDGEMAMBA_MODELS)
    params["hedgemamba"]["rows"] = []
    params["lia_mtr"]["bridges"] = params["lia_mtr"]["replicated"] = TABLE_1
    params["lia_mtr"]["niah"]["replicated"] = params["lia_mtr"]["niah"]["bridges"]
    (repo / "params.yaml").write_text(yaml.safe_dump({**params, "seeds": [0, 3]}, sort_keys=False))
    jobs = gen_dvc.snakemake_jobs(repo)
    by_name = {gen_dvc._stage_name(job): job for job in jobs}
    for stage in ("opal_align-align-s3", "opal_align-align_kl_guided-s3", "opal_offpolicy-offpolicy_matched-s3",
                  "opal_onpolicy-onpolicy-s3", "hedgehog_match-hedgehog-s3",
                  "hedgemamba_finetune-mil-s3", "bridge_instruct-lia_mtr-s3", "bridge_niah-mha-s3"):
        assert stage in by_name, stage
        sections = json.loads(by_name[stage].params.cfg)
        seeds = [v["train"]["seed"] if "train" in v else v["seed"] for v in sections.values()
                 if isinstance(v, dict) and ("train" in v or "seed" in v)]
        assert seeds and set(seeds) == {3}, (stage, sections)
    assert json.loads(by_name["opal_align-align"].params.cfg)["opal.align"]["train"]["seed"] == 0
    # a replicated stage-1 arm seeds from its untrained parent
    assert "results/opal/gdn/model" in set(map(str, by_name["opal_align-align-s3"].input))
    assert {"teacher_lm-qwen3", "opal_convert-gdn"} <= set(by_name) and "teacher_lm-qwen3-s3" not in by_name
    listed = {str(p) for paper in ("opal", "lia_mtr") for p in by_name[f"report_manifest-{paper}"].input}
    assert {"results/eval/opal-onpolicy-s3/items.csv", "results/lia_mtr/mme/mlp2x_gelu-s3/items.csv"} <= listed


def test_every_param_a_rule_passes_is_in_params_yaml():
    """DVC reads a stage's params from params.yaml itself: each dotted key a rule passes must be written there."""
    import yaml

    from relin.config.params import lookup

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    for job in gen_dvc.snakemake_jobs(ROOT):
        for key in json.loads(job.params.cfg) if "cfg" in job.params.keys() else []:
            lookup(params, key)  # a ConfigError names the missing key


def test_training_jobs_launch_on_gpus_per_job_processes(tmp_path):
    """``gpus_per_job: 2``: every training rule runs its stage under torchrun on two processes and asks for two GPUs;
    a job that does not train (conversion, evaluation) stays one process."""
    repo = copy_repository(tmp_path / "repo")
    two = overlay(tmp_path / "two.yaml", {"gpus_per_job": 2})
    out = snakemake(repo, "-n", "-p", "results/eval/opal-align/metrics.json", overlays=(two,)).stdout
    blocks = {block.split(":", 1)[0]: block for block in out.split("\nrule ")[1:]}
    launch = "torchrun --standalone --nproc-per-node 2 -m relin.cli"
    for rule in ("teacher_lm", "opal_align"):
        assert f"{launch} {rule.replace('_', '-')} " in blocks[rule] and "gpu=2" in blocks[rule], rule
    for rule in ("opal_convert", "eval_lm"):
        assert "torchrun" not in blocks[rule] and "gpu=2" not in blocks[rule], rule


def test_replicas_follow_each_papers_replicated_list():
    """``seeds`` replicates the models each paper lists: OPAL's stage-3 arms branch from the one stage-2B model,
    HedgeMamba's arms replicate their chain (init after hedgehog), and the report reads every replica."""
    jobs = {gen_dvc._stage_name(job): job for job in gen_dvc.snakemake_jobs(ROOT)}

    def inputs(stage):
        return set(map(str, jobs[stage].input))

    for rep in ("-s1", "-s2"):
        assert "results/opal/offpolicy_long/model" in inputs(f"opal_onpolicy-onpolicy{rep}")
        assert {"results/opal/offpolicy_long/model", f"results/opal/onpolicy{rep}/train_metrics.json"} <= \
            inputs(f"opal_offpolicy-offpolicy_matched{rep}")
        assert f"results/hedgemamba/init{rep}/model" in inputs(f"hedgemamba_finetune-finetune{rep}")
        assert f"results/hedgemamba/hedgehog{rep}/model" in inputs(f"hedgemamba_finetune-hedgehog_only{rep}")
        config = json.loads(jobs[f"opal_onpolicy-onpolicy{rep}"].params.cfg)
        assert config["opal.onpolicy"]["train"]["seed"] == int(rep[2:])
    # OPAL's arms with its own five seeds, the other papers' with the top-level three
    assert {f"opal_onpolicy-onpolicy-s{s}" for s in (3, 4)} <= set(jobs)
    assert "hedgemamba_finetune-finetune-s3" not in jobs
    assert "bridge_niah-lia_mtr-s2" in jobs and "bridge_niah-lia_mtr-s3" not in jobs
    assert not any(name.startswith(("opal_offpolicy-offpolicy_short-s", "opal_offpolicy-offpolicy_long-s",
                                    "bridge_instruct-lia_mtr-s", "bridge_niah-mha-s")) for name in jobs), \
        "models no paper lists keep one seed"
    # stage 1's arms keep one seed here; the stage after it continues from seed 0's model
    assert "opal_align-align-s1" not in jobs
    assert "results/opal/align/model" in inputs("opal_offpolicy-offpolicy_short")
    assert {"results/eval/opal-onpolicy-s4/items.csv", "results/lia_mtr/niah/linear_attn-s1/items.csv",
            "results/eval/hedgemamba-random-s2/items.csv"} <= \
        set().union(*(inputs(f"report_manifest-{paper}") for paper in ("opal", "hedgemamba", "lia_mtr")))


def test_stages_that_run_no_mixer_do_not_depend_on_layers_or_kernels(tmp_path):
    """The synthetic data, the teachers and LIA-MTR's tower and chat LLM (Table I's chain listed) never build a
    linear mixer, so an edit of a kernel or a layer leaves them current in ``dvc status``; the stages that load a
    saved hybrid depend on both."""
    import yaml

    repo = copy_repository(tmp_path / "repo")
    params = yaml.safe_load((repo / "params.yaml").read_text())
    params["lia_mtr"]["bridges"] = TABLE_1
    (repo / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stages = yaml.safe_load(gen_dvc.dvc_yaml(repo))["stages"]

    def code(stage, *prefixes):
        return [d for d in stages[stage]["deps"] if isinstance(d, str) and d.startswith(prefixes)]

    for stage in ("synth_text", "synth_vision", "teacher_lm-qwen3", "teacher_lm-gpt_neox", "vision_tower",
                  "clip_features", "chat_lm", "mme_text"):
        assert not code(stage, "src/relin/kernels/", "src/relin/layers/"), stage
    assert not code("synth_text", "src/relin/models/")
    for stage in ("eval_lm-opal-onpolicy", "opal_onpolicy-onpolicy", "hedgemamba_finetune-finetune"):
        assert "src/relin/kernels/gated_delta_rule/chunk.py" in code(stage, "src/relin/kernels/")
        assert code(stage, "src/relin/layers/"), stage


def test_a_kernel_edit_reaches_only_the_stages_that_run_it(generated_dvc_yaml):
    """``relin.kernels`` imports an op when first used and the layers import their op's package, so each stage's
    code deps hold only the ops it runs: an edit of LIA-MTR's retention kernel leaves OPAL and HedgeMamba current,
    one of the Gated DeltaNet kernel leaves LIA-MTR's bridges current."""
    import yaml

    stages = yaml.safe_load(generated_dvc_yaml)["stages"]

    def running(op):
        return {name for name, stage in stages.items()
                if any(isinstance(d, str) and d.startswith(f"src/relin/kernels/{op}/") for d in stage["deps"])}

    retention, delta_rule = running("multiscale_retention"), running("gated_delta_rule")
    assert retention and all(name.startswith(("bridge_", "eval_mme")) for name in retention), retention
    assert "bridge_niah-lia_mtr" in retention and "eval_lm-opal-onpolicy" not in retention
    assert "opal_onpolicy-onpolicy" in delta_rule
    assert not any(name.startswith(("bridge_", "eval_mme", "vision_tower", "chat_lm")) for name in delta_rule)


def test_no_file_a_dvc_stage_depends_on_is_empty(generated_dvc_yaml):
    """Issue #63 item 7: every `dvc repro` warned that an empty `__init__.py` among a stage's deps is empty; DVC
    warns of each empty dependency file, so none may be."""
    import yaml

    stages = yaml.safe_load(generated_dvc_yaml)["stages"]
    deps = {d for stage in stages.values() for d in stage.get("deps", []) if isinstance(d, str)}
    empty = sorted(d for d in deps if (ROOT / d).is_file() and (ROOT / d).stat().st_size == 0)
    assert not empty, f"DVC warns of these empty deps: {empty}"
