"""Helpers shared by the rules: the config sections a stage reads, where models live, the parent run."""
import hashlib
import json
import os
import re
import sys

from relin import tracking
from relin.config import lookup


def sections(*dotted):
    """JSON of the config sections a stage reads, keyed by dotted path (``relin <stage> --config``).

    Snakemake compares this string with the one recorded at the last run, so a change in any of
    these sections (and only these) reruns the job. A path may hold a wildcard, e.g.
    ``"teacher.models.{arch}"``; the helper then returns an input function over the wildcards.
    """
    def render(wildcards=None):
        paths = [path.format(**wildcards) if wildcards else path for path in dotted]
        return json.dumps({path: lookup(config, path) for path in paths}, sort_keys=True)

    if any("{" in path for path in dotted):
        return lambda wildcards: render(dict(wildcards.items()))
    return render()


def checkpoint_dir(root, *dotted):
    """``root/<digest of the sections>``: a stage resumes only from checkpoints of its current config.

    Training resumes from the newest checkpoint it finds; keyed by config, a changed parameter
    starts fresh instead of resuming a finished run of the old config.
    """
    def render(wildcards):
        cfg = sections(*dotted)
        cfg = cfg(wildcards) if callable(cfg) else cfg
        return f"{root.format(**dict(wildcards.items()))}/{hashlib.sha256(cfg.encode()).hexdigest()[:12]}"

    return render


# Language models that eval_lm can evaluate: eval name -> saved model directory.
LM_MODELS = {f"teacher-{arch}": f"results/teacher/{arch}/model" for arch in config["teacher"]["archs"]}


def lm_model(wildcards):
    return LM_MODELS[wildcards.name]


def start_pipeline_run():
    """Create the MLflow store and this invocation's parent run before any job starts.

    Jobs inherit ``RELIN_PARENT_RUN_ID``. An id already in the environment (a caller such as a
    test owning the parent run) is reused and left for that caller to end.
    """
    if os.environ.get(tracking.PARENT_ENV):
        return
    run_id = tracking.init_pipeline(tracking.tracking_config())
    if run_id:
        os.environ[tracking.PARENT_ENV] = run_id
        OWNED_PARENT_RUNS.append(run_id)
        print(f"relin: MLflow parent run {run_id}", file=sys.stderr)


def end_pipeline_run(status):
    """Terminate the parent run this invocation created (``FINISHED`` or ``FAILED``)."""
    for run_id in OWNED_PARENT_RUNS:
        tracking.end_pipeline(tracking.tracking_config(), run_id, status)


OWNED_PARENT_RUNS = []
