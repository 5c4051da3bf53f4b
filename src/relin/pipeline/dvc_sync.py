"""``dvc.yaml`` is the DAG of the current ``params.yaml``: regenerated when what it is generated from changed.

``workflow/scripts/gen_dvc.py`` writes ``dvc.yaml`` from the Snakefile's DAG of ``params.yaml`` (one stage per job,
its code dependencies from the relin source). A ``params.yaml`` that changes the DAG's shape (a bridge dropped
from ``lia_mtr.bridges``, fewer seeds) leaves a ``dvc.yaml`` whose stages DVC reports and ``dvc repro`` would run.
:func:`sync`, called by an executing ``snakemake`` before it builds its DAG, compares a digest of everything the
generator reads (:func:`inputs_digest`) and of ``dvc.yaml`` itself with the ones recorded when the generator last
wrote it (``.snakemake/relin-dvc-yaml.json``, written by ``gen_dvc.py``); when either differs it runs the generator,
which writes ``dvc.yaml`` atomically and only when its text changes. Unchanged inputs cost a digest of a few
hundred small files; a change costs one generation (about ten seconds).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from ..errors import UserError

GENERATOR = Path("workflow/scripts/gen_dvc.py")
STATE = Path(".snakemake/relin-dvc-yaml.json")
# What gen_dvc.py reads besides the relin source: the Snakefile and its rules, the params and their schema.
INPUTS = ("Snakefile", "params.yaml", "workflow/rules/*.smk", "workflow/schemas/*.yaml", str(GENERATOR))
_STAGE = re.compile(r"^  ([A-Za-z0-9_-]+):$", re.M)


class DvcYamlStale(UserError):
    """dvc.yaml does not follow params.yaml and could not be regenerated."""


def inputs_digest(root: Path = Path(".")) -> str:
    """sha256 over the names and contents of the files ``dvc.yaml`` is generated from (and Snakemake's version)."""
    import snakemake

    files = {path for pattern in INPUTS for path in root.glob(pattern) if path.is_file()}
    files.update(path for path in (root / "src" / "relin").rglob("*.py") if "__pycache__" not in path.parts)
    h = hashlib.sha256(f"snakemake {snakemake.__version__}\0".encode())
    for path in sorted(files):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def record(root: Path = Path("."), digest: str | None = None) -> None:
    """Note that ``dvc.yaml`` is what the generator makes of the current inputs (called by ``gen_dvc.py``)."""
    from ..io import atomic_write_text

    state = {"inputs": digest or inputs_digest(root), "dvc.yaml": _file_digest(root / "dvc.yaml")}
    atomic_write_text(root / STATE, json.dumps(state) + "\n")


def current(root: Path = Path(".")) -> bool:
    """Whether ``dvc.yaml`` is recorded as generated from the current inputs, unchanged since."""
    try:
        state = json.loads((root / STATE).read_text())
    except (OSError, ValueError):
        return False
    return state == {"inputs": inputs_digest(root), "dvc.yaml": _file_digest(root / "dvc.yaml")}


def stage_names(root: Path = Path(".")) -> list[str]:
    """The stages of ``dvc.yaml`` as gen_dvc.py writes it (two-space indented keys under ``stages:``)."""
    path = root / "dvc.yaml"
    return _STAGE.findall(path.read_text()) if path.is_file() else []


def _some(names: list[str], shown: int = 6) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def sync(root: Path = Path(".")) -> str | None:
    """Regenerate ``dvc.yaml`` unless it is current; one line saying what changed, or None. Raises
    :class:`DvcYamlStale` (one line) when the generator fails. Nothing to do outside a DVC project."""
    if not (root / ".dvc").is_dir() or not (root / GENERATOR).is_file() or current(root):
        return None
    before, text_before = stage_names(root), _file_digest(root / "dvc.yaml")
    env = {**os.environ, "DVC_NO_ANALYTICS": "1"}
    proc = subprocess.run([sys.executable, str(GENERATOR)], cwd=root, capture_output=True, text=True, env=env)
    if proc.returncode:
        lines = (proc.stderr.strip() or proc.stdout.strip() or f"exit status {proc.returncode}").splitlines()
        raise DvcYamlStale(f"dvc.yaml: could not be regenerated for params.yaml's DAG ({lines[-1]}); nothing was "
                           f"run: fix that, or run `python {GENERATOR}` to see the whole error")
    after = stage_names(root)
    if _file_digest(root / "dvc.yaml") == text_before:
        return None
    added, removed = sorted(set(after) - set(before)), sorted(set(before) - set(after))
    changes = [f"{label} {_some(names)}" for label, names in (("added", added), ("removed", removed)) if names]
    return (f"dvc.yaml regenerated for params.yaml's DAG ({len(after)} stage{'s' * (len(after) != 1)}"
            + (f"; {'; '.join(changes)}" if changes else "; stages' deps, params or outputs changed") + ")")
