"""Helpers shared by the rules: the config sections a stage reads and where models live."""
import json
import re

from relin import names
from relin.config import chain as chains
from relin.config.lia_mtr import BRIDGE_NAMES
from relin.config.opal import LM_EVAL_MODELS
from relin.config.papers import PAPERS, chains as paper_chains, evaluated_models
from relin.config.params import lookup
from relin.manifest import SECTIONS as MANIFEST_SECTIONS
from relin.manifest import paper_files
from relin.manifest import paths as manifest_paths


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
REPLICA = names.REPLICA_WILDCARD


def seeds_of(section):
    """The training seeds of a section's replicated models (``section`` dotted, e.g. ``lia_mtr.niah``): its own
    ``seeds``, else the top-level ones (both begin with the same first seed)."""
    return chains.section_seeds(lookup(config, section), SEEDS)


def seeded(render):
    """The sections JSON ``render`` gives (a string, or a function of the wildcards), with every training
    config's seed set to the replica's."""
    def with_seed(wildcards):
        rendered = json.loads(render(wildcards) if callable(render) else render)
        seed = names.replica_seed(getattr(wildcards, "rep", ""), SEEDS)
        return json.dumps(chains.with_seed(rendered, seed), sort_keys=True)

    return with_seed


# The model a teacher naming a checkpoints row loads, as the pretrained_checkpoint rule materialises it.
PRETRAINED_MODEL = "results/pretrained/{name}/model"


def teacher_reference(arch):
    """What a loaded teacher is read from: its checkpoints row's materialised model (``checkpoint``), or its hub id
    or path (``pretrained``); "" for a teacher trained in the DAG."""
    model = config["teacher"]["models"][arch]
    return PRETRAINED_MODEL.format(name=model["checkpoint"]) if model.get("checkpoint") else model["pretrained"]


def checkpoint_input(arch):
    """The materialised checkpoints row teacher ``arch`` loads, as an input named ``checkpoint`` (for ``unpack``)."""
    row = config["teacher"]["models"][arch].get("checkpoint")
    return {"checkpoint": PRETRAINED_MODEL.format(name=row)} if row else {}


# Teachers loaded (pretrained or checkpoint), not trained: each reads the tasks rendered with its own tokenizer.
PRETRAINED_ARCHS = [arch for arch in config["teacher"]["models"] if teacher_reference(arch)]


def text_data(arch):
    """The synthetic tasks as teacher ``arch`` reads them: rendered with its own tokenizer when it is loaded (a
    pretrained checkpoint or a checkpoints row), else with the project's (one dataset shared by every teacher
    trained in the DAG)."""
    return f"results/data/synth_text-{arch}" if arch in PRETRAINED_ARCHS else "results/data/synth_text"


def train_data(paper):
    """What a paper's student stages train on (``<paper>.train_data``): its teacher's synthetic tasks, or the
    corpus packed in that teacher's tokenizer. Evaluation always reads the tasks (:func:`lm_data`)."""
    arch = config[paper]["teacher"]
    return f"results/data/corpus-{arch}" if config[paper]["train_data"] == "corpus" else text_data(arch)


# A paper's chain (relin.config.chain): every model of OPAL and HedgeMamba is a row of its table, and the helpers
# below derive a row's inputs, options and config from it; a rule serves the rows whose ``rule`` is its name.
CHAINS = paper_chains(lambda path: lookup(config, path))
TEACHER_MODEL = {paper: f"{names.teacher_dir(config[paper]['teacher'])}/model" for paper in CHAINS}
TEACHER_EVAL = {paper: names.teacher_eval(config[paper]["teacher"]) for paper in CHAINS}
EVAL_DATA = {paper: text_data(config[paper]["teacher"]) for paper in CHAINS}
TRAIN_DATA = {paper: train_data(paper) for paper in CHAINS}
# The teacher's continuations of OPAL's held-out prompts, generated once for its training stages' KL (opal.smk).
TEACHER_CONTINUATIONS = "results/opal/teacher_continuations.json"


def rows_of(paper, rule):
    """The wildcard constraint of a chain rule: the names of the rows it builds."""
    return "|".join(name for name, step in CHAINS[paper].items() if step.rule == rule) or "(?!)"


def chain_models(paper):
    """Every model directory of a chain, replicas included."""
    return [names.chain_dir(paper, name, rep) for name in CHAINS[paper]
            for rep in chains.replicas(CHAINS[paper], config[paper]["replicated"], seeds_of(paper), name)]


def _row_file(paper, row, rep, file):
    """``results/<paper>/<row><rep>/<file>``, the replica the one of ``rep`` starts from."""
    if row == chains.TEACHER:
        return TEACHER_MODEL[paper]
    parent = chains.parent_replica(CHAINS[paper], config[paper]["replicated"], row, rep)
    return f"{names.chain_dir(paper, row, parent)}/{file}"


def chain_inputs(paper):
    """A row's inputs (for ``unpack``): ``start`` (the model it starts from), ``data`` (the paper's training data),
    ``budget`` (the train_metrics.json it matches) and the other rows' files it ``reads``, by option name."""
    def inputs(wildcards):
        step, rep = CHAINS[paper][wildcards.model], getattr(wildcards, "rep", "")
        files = {"start": _row_file(paper, step.start, rep, "model")} if step.start else {}
        files.update({"data": TRAIN_DATA[paper]} if step.data else {})
        files.update({"budget": _row_file(paper, step.budget, rep, "train_metrics.json")} if step.budget else {})
        for option, path in step.reads.items():
            row, file = path.split("/", 1)
            files[option] = _row_file(paper, row, rep, file)
        return files

    return inputs


def chain_options(paper):
    """A row's command options: its own (``options``) and its inputs other than ``start`` and the teacher, each as
    ``--<name> <path>``."""
    def options(wildcards, input):
        step = CHAINS[paper][wildcards.model]
        words = [f"--{option} {value}" for option, value in step.options.items()]
        words += [f"--{key} {input[key]}" for key in ("data", "budget", *step.reads) if key in input.keys()]
        return " ".join(words)

    return options


def chain_config(paper):
    """A row's config sections JSON, with its variant's values and, for a trained row, the replica's seed."""
    def render(wildcards):
        step = CHAINS[paper][wildcards.model]
        rendered = chains.with_variant({path: lookup(config, path) for path in step.sections}, step.variant)
        if step.trained:
            rendered = chains.with_seed(rendered, names.replica_seed(getattr(wildcards, "rep", ""), SEEDS))
        return json.dumps(rendered, sort_keys=True)

    return render


# Language models that eval_lm can evaluate: eval name -> saved model directory.
LM_MODELS = {
    **{names.teacher_eval(arch): f"{names.teacher_dir(arch)}/model" for arch in config["teacher"]["archs"]},
    **{name: path for paper in CHAINS for name, path in evaluated_models(paper, lambda p: lookup(config, p)).items()},
}


def lm_model(wildcards):
    return LM_MODELS[wildcards.name]


def lm_data(wildcards):
    """The dataset a model is evaluated on: its teacher family's (the tokenizer it was trained with)."""
    owner, rest = names.eval_owner(wildcards.name)
    return text_data(rest) if owner == "teacher" else EVAL_DATA[owner]


def paper_evaluations(paper):
    """The evaluations of a chain paper's teacher and of every evaluated model (replicas included)."""
    return [names.eval_file(name, "eval") for name in
            [TEACHER_EVAL[paper], *evaluated_models(paper, lambda p: lookup(config, p))]]


# The qwen3_5_text export of OPAL's hybrid: Qwen3.5's blocks are Qwen3's, so only a qwen3-family teacher's hybrid
# exports (a llama checkpoint's has no q/k norms, which Qwen3.5's attention layers apply).
OPAL_EXPORT = (["results/opal/export/export.json"]
               if config["teacher"]["models"][config["opal"]["teacher"]]["family"] == "qwen3" else [])


# lm-evaluation-harness results the report reads: none unless opal.lm_eval.tasks names tasks.
OPAL_LM_EVAL = (expand("results/opal/lm_eval/{name}.json", name=config["opal"]["lm_eval"]["models"])
                if config["opal"]["lm_eval"]["tasks"] else [])


def opal_model(wildcards):
    """An OPAL model's directory by name (LM_EVAL_MODELS)."""
    return TEACHER_MODEL["opal"] if wildcards.name == "teacher" else f"{names.chain_dir('opal', wildcards.name)}/model"


# The report reads one manifest per paper (relin report-manifest), listed from the paper's table.
def manifest_inputs(wildcards):
    """Every file the manifest of ``wildcards.paper`` lists (relin.manifest.paper_files)."""
    return manifest_paths(paper_files(wildcards.paper, lambda path: lookup(config, path)))


def manifest_sections(wildcards):
    return sections(*MANIFEST_SECTIONS[wildcards.paper])


def lia_checkpoint(part):
    """The materialised checkpoints row the tower or chat LLM (``part``) loads, as an input named ``checkpoint``."""
    row = config["lia_mtr"][part].get("checkpoint")
    return {"checkpoint": PRETRAINED_MODEL.format(name=row)} if row else {}


def checkpoint_flag(wildcards, input):
    """`` --checkpoint DIR`` when the rule reads a checkpoints row, else nothing (the command as without rows)."""
    return f" --checkpoint {input.checkpoint}" if "checkpoint" in input.keys() else ""
