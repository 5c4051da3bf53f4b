"""The report's inputs from the papers' manifests (:mod:`relin.manifest`): each file read and checked by
its kind's reader, under the model name its manifest gives."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..manifest import read_manifest_file
from .build import ReportInputs
from .inputs import read_by_length, read_eval, read_history, read_speed, read_train_metrics, unique_names
from .lm_scores import read_items

# Each kind of a manifest's {"name", "path"} entries and the reader (of a NAME=PATH spec) that checks it.
READERS = {
    "eval": read_eval,
    "items": read_items,
    "history": read_history,
    "by_length": read_by_length,
    "train_metrics": read_train_metrics,
    "speed": read_speed,
    "opal_layers": lambda spec: read_train_metrics(spec, "a layers.json of relin opal-convert"),
    "hedgemamba_init": lambda spec: read_train_metrics(spec, "a check.json of relin hedgemamba-init"),
    "hedgemamba_decays": lambda spec: read_train_metrics(spec, "a decays.json of relin hedgemamba-finetune"),
}
SINGLE = ("speed", "opal_layers", "hedgemamba_init")


def read_manifests(paths: list[str | Path]) -> ReportInputs:
    """Every file the manifests list, read by kind; a model named twice in one kind is an error."""
    found: dict[str, list] = {kind: [] for kind in READERS}
    lia_mtr: dict = {}
    lm_eval: list[str] = []
    for path in paths:
        data = read_manifest_file(path)
        for kind, entries in data["files"].items():
            if kind == "lia_mtr":
                lia_mtr = entries
            elif kind == "lm_eval":
                lm_eval += [e["path"] for e in entries]
            elif kind in READERS:
                found[kind] += [READERS[kind](f"{e['name']}={e['path']}") for e in entries]
            else:
                known = ", ".join([*READERS, "lia_mtr", "lm_eval"])
                raise InputError(f"{path}: unknown kind {kind!r} (expected {known})")
    if not (found["eval"] or found["history"] or lia_mtr):
        raise InputError(f"{', '.join(map(str, paths))}: the manifests list nothing to report")
    for kind in ("eval", "items", "history", "by_length", "train_metrics"):
        found[kind] = _dedupe(found[kind])
        unique_names(found[kind], kind.replace("_", "-"))
    return ReportInputs(
        evals=found["eval"], items=found["items"], histories=found["history"], by_length=found["by_length"],
        train_metrics=found["train_metrics"], hedgemamba_decays=found["hedgemamba_decays"],
        **{kind: (found[kind][0] if found[kind] else None) for kind in SINGLE}, lia_mtr=lia_mtr, lm_eval=lm_eval)


def _dedupe(items: list) -> list:
    """Drop a file two manifests both list (a teacher shared by two papers), keeping the first."""
    seen: set[tuple[str, Path]] = set()
    out = []
    for item in items:
        if (item.name, Path(item.path)) not in seen:
            seen.add((item.name, Path(item.path)))
            out.append(item)
    return out
