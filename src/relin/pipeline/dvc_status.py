"""``relin status``: DVC's status of every stage in one line, then a count.

``dvc status`` prints each changed dependency and output of each stage on its own line, and has no brief form
(``--json`` and ``--quiet`` aside). A stage depends on every relin source file it runs, so a checkout that has
recorded nothing in ``dvc.lock`` (a fresh clone: ``dvc.lock`` is git-ignored, ``results/`` absent) gets every
stage's every file, some hundred lines a stage. This reads the same status (:meth:`dvc.repo.Repo.status`, on
``dvc.yaml`` as it is) and says per stage whether it is up to date, has no ``dvc.lock`` entry, which of its
dependencies or params changed or are missing, and which outputs are missing or changed.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError

SHOWN = 3   # names listed per kind of change before "+N more"


class DvcStatusError(UserError):
    """DVC could not read the project's status (no DVC project here, its lock held, a broken dvc.yaml)."""


def stage_lines(root: Path = Path(".")) -> list[str]:
    """One line per stage of ``root``'s DVC project, in ``dvc.yaml``'s order, then the count of each state."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    from .dvc_lock import params_read_once

    try:
        with Repo(str(root)) as repo, params_read_once():   # status() takes the repository lock
            status = repo.status()
            stages = [stage for stage in repo.index.stages if getattr(stage, "name", None)]
            recorded = _in_lock(stages)
    except DvcException as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise DvcStatusError(f"DVC could not read the status of {root.resolve()}: {first}") from err
    lines, counts = [], {"up to date": 0, "changed": 0, "not in dvc.lock": 0}
    for stage in stages:
        entry = status.get(stage.addressing)
        state = "up to date" if not entry else "changed" if stage.addressing in recorded else "not in dvc.lock"
        counts[state] += 1
        lines.append(f"{stage.addressing}: {describe(entry or [], stage.addressing in recorded)}")
    lines.append(f"{len(stages)} stages: " + ", ".join(f"{n} {state}" for state, n in counts.items()))
    return lines


def _in_lock(stages: list) -> set[str]:
    """The addresses of the stages with an entry in their ``dvc.lock`` (each lock file read once)."""
    entries: dict[str, set[str]] = {}
    for stage in stages:
        if stage.dvcfile.path not in entries:
            entries[stage.dvcfile.path] = set(stage.dvcfile.lockfile_contents.get("stages") or {})
    return {stage.addressing for stage in stages if stage.name in entries[stage.dvcfile.path]}


def describe(entry: list, recorded: bool) -> str:
    """A stage's entry of ``Repo.status()`` (``[{"changed deps": {path: st}}, {"changed outs": ...},
    "changed checksum", "always changed"]``; a params file's value is ``{param: st}``) in a few words."""
    deps, outs = {}, {}
    for item in entry:
        if isinstance(item, dict):
            deps.update(_flat(item.get("changed deps", {})))
            outs.update(_flat(item.get("changed outs", {})))
    words = [] if recorded or not entry else ["not in dvc.lock"]
    # without a dvc.lock entry every dependency differs from no record ("modified", "new"): only missing ones tell
    changed = [name for name, st in deps.items() if st in ("modified", "new", "update available")] if recorded else []
    for label, names in (("deps changed", changed),
                         ("deps missing", [name for name, st in deps.items() if st == "deleted"]),
                         ("outputs missing", [name for name, st in outs.items() if st == "deleted"]),
                         ("outputs changed", [name for name, st in outs.items() if st in ("modified", "new")]),
                         ("outputs not in DVC's cache", [name for name, st in outs.items() if st == "not in cache"])):
        if names:
            words.append(f"{label}: {_listed(names)}")
    words += [{"changed checksum": "command changed"}.get(item, item) for item in entry if isinstance(item, str)]
    return "; ".join(words) or "up to date"


def _flat(changes: dict) -> dict[str, str]:
    """``{path: st}``, a params file's ``{path: {param: st}}`` as ``{"path:param": st}``."""
    flat = {}
    for name, st in changes.items():
        flat.update({f"{name}:{param}": sub for param, sub in st.items()} if isinstance(st, dict) else {name: st})
    return flat


def _listed(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" (+{len(names) - SHOWN} more)" if len(names) > SHOWN else "")
