"""Record finished DVC stages in ``dvc.lock`` in one pass: ``python -m relin.pipeline.dvc_lock STAGE...``.

``dvc commit STAGE...`` collects the repository's stages again for every target (a dozen seconds each with a
hundred stages), so recording the stages a partial run finished took minutes. This collects them once, then saves
and commits each as ``dvc commit --force`` does (:func:`dvc.repo.commit.commit`), under the repository lock, and
rewrites each lock file once: the new entries in, and the entries of stages its ``dvc.yaml`` no longer defines (a
``params.yaml`` with fewer bridges regenerates it with fewer stages, ``relin.pipeline.dvc_sync``) out.
"""
from __future__ import annotations

import contextlib
import copy
import sys
from pathlib import Path


def commit_stages(names: list[str], root: Path = Path(".")) -> list[str]:
    """Save the named stages' dependencies and outputs and write their ``dvc.lock`` entries, dropping the entries
    of stages no ``dvc.yaml`` defines; the names committed."""
    from dvc.repo import Repo

    wanted = set(names)
    with Repo(str(root)) as repo, repo.lock, params_read_once():
        every = [stage for stage in repo.index.stages if getattr(stage, "name", None)]
        stages = [stage for stage in every if stage.name in wanted]
        for stage in stages:
            stage.save()
            stage.commit()
        by_file: dict = {}
        for stage in every:
            by_file.setdefault(stage.dvcfile.path, (stage.dvcfile, [], set()))[2].add(stage.name)
        for stage in stages:
            by_file[stage.dvcfile.path][1].append(stage)
        for dvcfile, group, defined in by_file.values():
            _dump(repo, dvcfile, group, defined)
    return [stage.name for stage in stages]


@contextlib.contextmanager
def params_read_once():
    """DVC parses ``params.yaml`` again for every params dependency of every stage (twice per stage, a quarter of a
    partial commit's time with DVC's pure-Python YAML): one commit parses it once (it does not change meanwhile)."""
    from dvc.dependency import param

    load_path, parsed = param.load_path, {}

    def once(path, fs, **kwargs):
        key = (path, id(fs), tuple(sorted(kwargs.items())))
        if key not in parsed:
            parsed[key] = load_path(path, fs, **kwargs)
        return copy.deepcopy(parsed[key])

    param.load_path = once
    try:
        yield
    finally:
        param.load_path = load_path


def _dump(repo, dvcfile, stages: list, defined: set[str]) -> None:
    """What ``dvcfile.dump_stages(stages, update_pipeline=False)`` writes to the lock file, less the entries of
    stages not in ``defined``, written once and only when it changes. The lock file is not parsed again with DVC's
    round-trip YAML (seconds for a few hundred kB): its contents as the index read them are updated, then dumped
    with DVC's own dumper, so the text is what DVC writes."""
    from dvc.stage import serialize
    from dvc.utils.serialize import dump_yaml

    lockfile = dvcfile._lockfile
    data = copy.deepcopy(dvcfile.lockfile_contents) or {"schema": "2.0"}
    entries = data.setdefault("stages", {})
    changed = not lockfile.exists() and bool(stages)
    for stage in stages:
        entry = serialize.to_lockfile(stage)
        changed |= entries.get(stage.name) != entry[stage.name]
        entries.update(entry)
    for name in [name for name in entries if name not in defined]:
        del entries[name]
        changed = True
    if changed:
        dump_yaml(lockfile.path, data, fs=repo.fs)


def main(argv: list[str] | None = None) -> int:
    names = sys.argv[1:] if argv is None else argv
    try:
        commit_stages(names)
    except Exception as err:  # noqa: BLE001 - DVC's errors share no base class worth naming; the caller warns
        print(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
