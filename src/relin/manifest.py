"""The report manifest: every stage output a paper's report section reads, named by the model it belongs to.

One JSON per paper (``results/report-inputs/<paper>.json``), listed from the same tables the rules derive their
jobs from (a paper's chain, :mod:`relin.config.papers`; LIA-MTR's bridges), each path as :mod:`relin.names` spells
it. ``relin report-manifest`` writes it with each file's content digest, so a changed input changes the manifest
(and DVC reruns the report);
``relin report --manifest`` reads manifests and nothing else: no per-model flag, no name guessed from a path.
A row added to a paper's table is a row of its manifest, hence of the report, with no other edit.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from .config.papers import PAPERS, Get, chain_models, chains, paper_chain
from .errors import InputError
from .io import read_json
from .names import EVAL_FILES, chain_dir, chain_eval, eval_file, mme_file, replica_suffixes, teacher_dir, teacher_eval

# Kinds whose entries are {"name", "path"}; LIA-MTR's outputs are grouped in "lia_mtr".
KINDS = ("eval", "items", "by_length", "history", "train_metrics", "speed", "opal_layers", "hedgemamba_init",
         "hedgemamba_decays", "lm_eval")

# The params a paper's manifest is listed from, and their types (the config sections of relin report-manifest).
SECTIONS: dict[str, dict[str, type]] = {
    "opal": {"seeds": list[int], "opal.seeds": list[int], "opal.teacher": str, "opal.replicated": list[str],
             "opal.rows": list[str], "opal.lm_eval.tasks": list[str], "opal.lm_eval.models": list[str]},
    "hedgemamba": {"seeds": list[int], "hedgemamba.seeds": list[int], "hedgemamba.teacher": str,
                   "hedgemamba.replicated": list[str], "hedgemamba.rows": list[str]},
    "lia_mtr": {"seeds": list[int], "lia_mtr.seeds": list[int], "lia_mtr.bridges": list[str],
                "lia_mtr.replicated": list[str], "lia_mtr.niah.seeds": list[int], "lia_mtr.niah.bridges": list[str],
                "lia_mtr.niah.replicated": list[str], "lia_mtr.source": str, "lia_mtr.tower.checkpoint": str},
}


def _entry(name: str, path: str) -> dict[str, str]:
    return {"name": name, "path": path}


def _scored(name: str) -> dict[str, list[dict[str, str]]]:
    return {kind: [_entry(name, eval_file(name, kind))] for kind in EVAL_FILES}


def _merge(into: dict[str, list], more: dict[str, list]) -> None:
    for kind, entries in more.items():
        into.setdefault(kind, []).extend(entries)


def chain_files(paper: str, get: Get) -> dict[str, list[dict[str, str]]]:
    """The report inputs of a chain paper: its teacher's evaluation and history, each evaluated model's scores,
    each trained model's history and budget, and the paper's own outputs."""
    chain, teacher = paper_chain(paper, get), get(f"{paper}.teacher")
    files: dict[str, list] = {kind: [] for kind in KINDS}
    _merge(files, _scored(teacher_eval(teacher)))
    files["history"].append(_entry(teacher_eval(teacher), f"{teacher_dir(teacher)}/history.csv"))
    for name, rep in chain_models(paper, get):
        model, where = chain_eval(paper, name, rep), chain_dir(paper, name, rep)
        if chain[name].evaluated:
            _merge(files, _scored(model))
        if rep:  # training curves, budgets and probes: of the first seed's models
            continue
        if chain[name].trained:
            files["history"].append(_entry(model, f"{where}/history.csv"))
            files["train_metrics"].append(_entry(model, f"{where}/train_metrics.json"))
        if chain[name].rule == "hedgemamba_finetune":
            files["hedgemamba_decays"].append(_entry(model, f"{where}/decays.json"))
        if chain[name].rule == "hedgemamba_init":
            files["hedgemamba_init"].append(_entry(model, f"{where}/check.json"))
    if paper == "opal":
        files["speed"].append(_entry("opal-onpolicy", "results/opal/speed.csv"))
        files["opal_layers"].append(_entry("opal-gdn", "results/opal/gdn/layers.json"))
        if get("opal.lm_eval.tasks"):
            files["lm_eval"] += [_entry(m, f"results/opal/lm_eval/{m}.json") for m in get("opal.lm_eval.models")]
    return files


def lia_mtr_files(get: Get) -> dict[str, Any]:
    """LIA-MTR's report inputs: per bridge (and replica) its MME scores and scored answers and its two phases'
    histories, the text-only reference and the per-patch probe (synthetic scenes have captions and questions per
    training image; MME's images do not), the bridge NIAH, memory (with Lemma 2's checks) and the gate probe; with a
    tower from a checkpoints row (one that reads real photos), the tower (its kind) and the photos the VLM described."""
    def reps(section: str, bridge: str) -> list[str]:
        seeds = get(f"{section}.seeds") or get("seeds")
        return replica_suffixes(seeds, bridge in get(f"{section}.replicated"))

    bridges = get("lia_mtr.bridges")
    mme = [{"name": name, "metrics": mme_file(name, "metrics"), "items": mme_file(name, "items")}
           for name in (f"{b}{r}" for b in bridges for r in reps("lia_mtr", b))]
    # no Table I bridge: no chain of tower, LLM, text reference, per-patch and gate probes either
    synthetic = get("lia_mtr.source") == "synthetic" and bool(bridges)
    if synthetic:
        mme.append({"name": "text_reference", "metrics": mme_file("text_reference", "metrics"),
                    "items": mme_file("text_reference", "items")})
    needles = [{"name": f"{b}{r}", **{key: f"results/lia_mtr/niah/{b}{r}/{file}" for key, file in
                                      (("metrics", "metrics.json"), ("items", "items.csv"), ("history", "history.csv"),
                                       ("table", "niah.csv"))}}
               for b in get("lia_mtr.niah.bridges") for r in reps("lia_mtr.niah", b)]
    history = [_entry("lia_mtr-tower", "results/lia_mtr/tower/history.csv"),
               _entry("lia_mtr-llm", "results/lia_mtr/llm/history.csv")] if bridges else []
    history += [_entry(f"lia_mtr-{phase}-{b}", f"results/lia_mtr/{phase}/{b}/history.csv")
                for phase in ("align", "instruct") for b in bridges]
    lia = {"mme": mme, "niah": needles, "memory": "results/lia_mtr/memory/memory.csv",
           "memory_metrics": "results/lia_mtr/memory/metrics.json"}
    if bridges:
        lia["probe"] = "results/lia_mtr/probe/probe.json"
    if synthetic:  # the per-patch probe reads the drawn scenes' questions
        lia["patch_probe"] = "results/lia_mtr/mme/patch_probe/metrics.json"
    if synthetic and get("lia_mtr.tower.checkpoint"):
        lia["tower"] = "results/lia_mtr/tower/model"
        lia["photos"] = "results/lia_mtr/photos"
    return {"history": history, "lia_mtr": lia}


def paper_files(paper: str, get: Get) -> dict[str, Any]:
    """What the report's section of ``paper`` reads (see the module docstring)."""
    if paper == "lia_mtr":
        return lia_mtr_files(get)
    if paper in chains():
        return chain_files(paper, get)
    raise InputError(f"report manifest: unknown paper {paper!r} (expected one of {', '.join(PAPERS)})")


def paths(files: dict[str, Any]) -> list[str]:
    """Every path a manifest lists, in order."""
    out: list[str] = []

    def walk(node: Any, key: str = "") -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, k)
        elif isinstance(node, list):
            for v in node:
                walk(v, key)
        elif isinstance(node, str) and key != "name":
            out.append(node)

    walk(files)
    return out


def digest(path: Path) -> str:
    """sha256 of a file, or of a folder's files (relative names and bytes, in sorted order)."""
    h = hashlib.sha256()
    if path.is_dir():
        for file in sorted(p for p in path.rglob("*") if p.is_file()):
            h.update(file.relative_to(path).as_posix().encode() + b"\0")
            h.update(file.read_bytes())
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def manifest(paper: str, get: Get, root: Path = Path(".")) -> dict[str, Any]:
    """The manifest of one paper: its files, and each file's digest (a missing file is one clear line)."""
    files = paper_files(paper, get)
    digests = {}
    for path in paths(files):
        if not (root / path).exists():
            raise InputError(f"report manifest of {paper}: {path} does not exist (expected the output of the stage "
                             f"that writes it; run the DAG, e.g. snakemake --cores 2 {paper})")
        digests[path] = digest(root / path)
    return {"paper": paper, "files": files, "sha256": digests}


def read_manifest_file(path: str | Path) -> dict[str, Any]:
    """A manifest written by ``relin report-manifest``, checked."""
    data = read_json(path, "a report manifest of relin report-manifest")
    if data.get("paper") not in PAPERS or not isinstance(data.get("files"), dict):
        raise InputError(f"{path}: not a report manifest (expected keys paper, one of {', '.join(PAPERS)}, and files)")
    return data
