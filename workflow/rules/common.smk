"""Helpers shared by the rules: the config sections a stage reads and where models live."""
import json
import re

from relin.config.params import lookup


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


# Language models that eval_lm can evaluate: eval name -> saved model directory.
LM_MODELS = {f"teacher-{arch}": f"results/teacher/{arch}/model" for arch in config["teacher"]["archs"]}


def lm_model(wildcards):
    return LM_MODELS[wildcards.name]
