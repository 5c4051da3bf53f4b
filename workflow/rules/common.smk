"""Helpers shared by the rules: the config sections a stage reads and where models live."""
import json
import re

from relin.config.hedgemamba import FINETUNES as HEDGEMAMBA_FINETUNES
from relin.config.hedgemamba import MATCH_VARIANTS as HEDGEMAMBA_MATCH_VARIANTS
from relin.config.hedgemamba import MODELS as HEDGEMAMBA_MODELS
from relin.config.lia_mtr import BRIDGE_NAMES
from relin.config.opal import ALIGNMENTS as OPAL_ALIGNMENTS
from relin.config.opal import CONVERSIONS as OPAL_CONVERSIONS
from relin.config.opal import LM_EVAL_MODELS
from relin.config.opal import MODELS as OPAL_MODELS
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


# Training jobs run on config["gpus_per_job"] processes of one node, launched by torchrun.
GPUS_PER_JOB = config["gpus_per_job"]
TRAIN = "relin" if GPUS_PER_JOB == 1 else f"torchrun --standalone --nproc-per-node {GPUS_PER_JOB} -m relin.cli"


# Replicas of the student stages, one per training seed (config "seeds"): the first seed trains the models as
# named, each further seed s a replica "<name>-s<s>" of the models a paper lists in "replicated". Rules of student
# stages carry a {rep} wildcard ("" or "-s<s>") and set every train.seed of their sections to the replica's seed.
SEEDS = config["seeds"]
REPLICAS = ["", *(f"-s{seed}" for seed in SEEDS[1:])]
REPLICA = "(-s[0-9]+)?"


def replicas_of(paper, model):
    """The replica suffixes a paper's model is trained with (``paper`` a dotted section, e.g. ``lia_mtr.niah``)."""
    return REPLICAS if model in lookup(config, paper)["replicated"] else [""]


def parent_replica(paper, parent, rep):
    """The replica of ``parent`` that replica ``rep`` of its child starts from: the same one when the parent is
    replicated too, else the parent as named (the child's seeds then branch from one parent)."""
    return rep if parent in config[paper]["replicated"] else ""


def replica_seed(replica):
    return int(replica[2:]) if replica else SEEDS[0]


def seeded(render):
    """The sections JSON ``render`` gives (a string, or a function of the wildcards), with every training
    config's seed set to the replica's."""
    def with_seed(wildcards):
        rendered = json.loads(render(wildcards) if callable(render) else render)
        seed = replica_seed(getattr(wildcards, "rep", ""))
        for path, value in rendered.items():
            if path.endswith(".train") and isinstance(value, dict):
                value["seed"] = seed
            elif isinstance(value, dict) and isinstance(value.get("train"), dict):
                value["train"]["seed"] = seed
        return json.dumps(rendered, sort_keys=True)

    return with_seed


def text_data(arch):
    """The synthetic tasks as teacher ``arch`` reads them: rendered with its own tokenizer when it is a pretrained
    checkpoint, else with the project's (one dataset shared by every teacher trained in the DAG)."""
    return f"results/data/synth_text-{arch}" if config["teacher"]["models"][arch]["pretrained"] else \
        "results/data/synth_text"


PRETRAINED_ARCHS = [arch for arch, model in config["teacher"]["models"].items() if model["pretrained"]]


def train_data(paper):
    """What a paper's student stages train on (``<paper>.train_data``): its teacher's synthetic tasks, or the
    corpus packed in that teacher's tokenizer. Evaluation always reads the tasks (:func:`lm_data`)."""
    arch = config[paper]["teacher"]
    return f"results/data/corpus-{arch}" if config[paper]["train_data"] == "corpus" else text_data(arch)


# OPAL's trained models (the conversions are not trained, and not replicated).
OPAL_TRAINED = [name for name in OPAL_MODELS if name not in ("swa", *OPAL_CONVERSIONS)]
# Language models that eval_lm can evaluate: eval name -> saved model directory.
LM_MODELS = {
    **{f"teacher-{arch}": f"results/teacher/{arch}/model" for arch in config["teacher"]["archs"]},
    **{f"opal-{name}": f"results/opal/{name}/model" for name in OPAL_MODELS if name not in OPAL_TRAINED},
    **{f"opal-{name}{rep}": f"results/opal/{name}{rep}/model" for name in OPAL_TRAINED
       for rep in replicas_of("opal", name)},
    **{f"hedgemamba-{name}{rep}": f"results/hedgemamba/{name}{rep}/model" for name in HEDGEMAMBA_MODELS
       for rep in replicas_of("hedgemamba", name)},
}


def lm_model(wildcards):
    return LM_MODELS[wildcards.name]


def lm_data(wildcards):
    """The dataset a model is evaluated on: its teacher family's (the tokenizer it was trained with)."""
    name = wildcards.name
    if name.startswith("teacher-"):
        return text_data(name.removeprefix("teacher-"))
    return OPAL_DATA if name.startswith("opal-") else HEDGEMAMBA_DATA


# HedgeMamba's GPT-NeoX teacher, and its evaluation's name.
HEDGEMAMBA_TEACHER = f"results/teacher/{config['hedgemamba']['teacher']}/model"
HEDGEMAMBA_TEACHER_EVAL = f"teacher-{config['hedgemamba']['teacher']}"
HEDGEMAMBA_DATA = text_data(config["hedgemamba"]["teacher"])
HEDGEMAMBA_TRAIN_DATA = train_data("hedgemamba")


# OPAL: the teacher it converts (and its evaluation's name), and what each off-policy phase starts from.
OPAL_TEACHER = f"results/teacher/{config['opal']['teacher']}/model"
OPAL_TEACHER_EVAL = f"teacher-{config['opal']['teacher']}"
OPAL_DATA = text_data(config["opal"]["teacher"])
OPAL_TRAIN_DATA = train_data("opal")


def opal_previous(wildcards):
    """Stage 2A starts from stage 1, 2B from 2A, the two Table 3 controls from 2B (each of the same replica when that
    stage is replicated too: :func:`parent_replica`)."""
    stage = {"short": "align", "long": "offpolicy_short", "matched": "offpolicy_long",
             "teacher": "offpolicy_long"}[wildcards.phase]
    return f"results/opal/{stage}{parent_replica('opal', stage, wildcards.rep)}/model"


# lm-evaluation-harness results the report reads: none unless opal.lm_eval.tasks names tasks.
OPAL_LM_EVAL = (expand("results/opal/lm_eval/{name}.json", name=config["opal"]["lm_eval"]["models"])
                if config["opal"]["lm_eval"]["tasks"] else [])


def opal_model(wildcards):
    """An OPAL model's directory by name (LM_EVAL_MODELS)."""
    return OPAL_TEACHER if wildcards.name == "teacher" else f"results/opal/{wildcards.name}/model"


def opal_budget(wildcards):
    """The Table 3 controls take stage 3's budget (steps, teacher-scored tokens, horizons) of their replica."""
    if wildcards.phase in ("matched", "teacher"):
        return [f"results/opal/onpolicy{parent_replica('opal', 'onpolicy', wildcards.rep)}/train_metrics.json"]
    return []


def opal_offpolicy_sections(wildcards):
    extra = ["opal.onpolicy"] if wildcards.phase == "teacher" else []
    return seeded(sections(f"opal.offpolicy_{wildcards.phase}", "opal.niah_protocol", *extra))(wildcards)


def hedgemamba_start(wildcards):
    """What stage 2 and each control fine-tunes: HedgeMamba's init, the teacher (random, mil) or stage 1."""
    rep = parent_replica("hedgemamba", "hedgehog", wildcards.rep)
    return {"hedgemamba": f"results/hedgemamba/init{rep}/model", "random": HEDGEMAMBA_TEACHER,
            "mil": HEDGEMAMBA_TEACHER, "hedgehog": f"results/hedgemamba/hedgehog{rep}/model"
            }[HEDGEMAMBA_FINETUNES[wildcards.model]]


def hedgemamba_finetune_sections(wildcards):
    """The controls built from the teacher also read stage 1's budget and the layers' options they build."""
    if HEDGEMAMBA_FINETUNES[wildcards.model] in ("random", "mil"):
        render = sections("hedgemamba.finetune", "hedgemamba.match.train", "hedgemamba.hedgehog",
                          "hedgemamba.mamba", "hedgemamba.kernel_backend")
    else:
        render = sections("hedgemamba.finetune")
    return seeded(render)(wildcards)


def hedgehog_match_sections(wildcards):
    """Stage 1's sections; a loss variant is the same config with its loss (a named config, not a flag)."""
    rendered = json.loads(seeded(sections("hedgemamba.hedgehog", "hedgemamba.match",
                                          "hedgemamba.kernel_backend"))(wildcards))
    loss = HEDGEMAMBA_MATCH_VARIANTS[wildcards.model]
    if loss is not None:
        rendered["hedgemamba.match"] = {**rendered["hedgemamba.match"], "loss": loss}
    return json.dumps(rendered, sort_keys=True)


def opal_convert_inputs(wildcards):
    """The gdn conversion scores the teacher's layers on training rows; the SWA one keeps its layers, a selection
    variant chooses from its scores."""
    if wildcards.conversion == "gdn":
        return {"teacher": OPAL_TEACHER, "data": OPAL_TRAIN_DATA}
    return {"teacher": OPAL_TEACHER, "layers": "results/opal/gdn/layers.json"}


def opal_convert_sections(wildcards):
    """A selection variant is the same config with its layer_selection (a named config, not a flag)."""
    if wildcards.conversion == "swa":
        return sections("opal.swa", "opal.kernel_backend")
    rendered = json.loads(sections("opal.layer_selection", "opal.keep_every", "opal.attention_layers",
                                   "opal.kernel_backend", "opal.gdn"))
    if (selection := OPAL_CONVERSIONS[wildcards.conversion]) is not None:
        rendered["opal.layer_selection"], rendered["opal.attention_layers"] = selection, []
    return json.dumps(rendered, sort_keys=True)


# The report: of the three papers (rule report), or of one (rule paper_report, built by the paper's target).
PAPERS = ("opal", "hedgemamba", "lia_mtr")


def report_files(papers):
    """The stage outputs a report over ``papers`` reads, by the ``relin report`` option that takes them (``_`` for
    ``-``; ``item_scores`` for ``--items``, a name Snakemake keeps); a paper's section needs its teacher's evaluation
    and history beside its own models'."""
    teachers = [config[paper]["teacher"] for paper in papers if paper != "lia_mtr"]
    models = [name for name in LM_MODELS
              if name.split("-", 1)[0] in papers or name in (f"teacher-{arch}" for arch in teachers)]
    files = {"eval": [f"results/eval/{name}/metrics.json" for name in models],
             "item_scores": [f"results/eval/{name}/items.csv" for name in models],
             "by_length": [f"results/eval/{name}/accuracy_by_length.csv" for name in models],
             "history": [f"results/teacher/{arch}/history.csv" for arch in dict.fromkeys(teachers)],
             "train_metrics": [], "hedgemamba_decays": [], "lia_mtr": [], "lm_eval": []}
    if "opal" in papers:
        files["history"] += expand("results/opal/{stage}/history.csv", stage=OPAL_TRAINED)
        files["train_metrics"] += expand("results/opal/{stage}/train_metrics.json", stage=OPAL_TRAINED)
        files.update(speed="results/opal/speed.csv", opal_layers="results/opal/gdn/layers.json")
        files["lm_eval"] += OPAL_LM_EVAL
    if "hedgemamba" in papers:
        files["history"] += expand("results/hedgemamba/{stage}/history.csv", stage=HEDGEMAMBA_MODELS)
        files["train_metrics"] += expand("results/hedgemamba/{model}/train_metrics.json", model=HEDGEMAMBA_FINETUNES)
        files["hedgemamba_init"] = "results/hedgemamba/init/check.json"
        files["hedgemamba_decays"] += expand("results/hedgemamba/{model}/decays.json", model=HEDGEMAMBA_FINETUNES)
    if "lia_mtr" in papers:
        files["lia_mtr"] += LIA_MTR_REPORT
        files["history"] += list(LIA_MTR_HISTORIES.values())
    return files


def report_options(wildcards, input):
    """The ``relin report`` options for the inputs; LIA-MTR's histories are labelled with their report names."""
    names = {path: name for name, path in LIA_MTR_HISTORIES.items()}
    words = []
    for key, files in input.items():
        paths = [files] if isinstance(files, str) else list(files)
        if paths:
            option = "items" if key == "item_scores" else key.replace("_", "-")
            words += [f"--{option}", *(f"{names[p]}={p}" if p in names else p for p in paths)]
    return " ".join(words)
