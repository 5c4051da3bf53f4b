"""Record finished DVC stages in ``dvc.lock`` in one pass: ``python -m relin.dvc_lock STAGE...``.

``dvc commit STAGE...`` collects the repository's stages again for every target (a dozen seconds each with a
hundred stages), so recording the stages a partial run finished took minutes. This collects them once, then saves,
commits and dumps each as ``dvc commit --force`` does (:func:`dvc.repo.commit.commit`), under the repository lock.
"""
from __future__ import annotations

import sys
from pathlib import Path


def commit_stages(names: list[str], root: Path = Path(".")) -> list[str]:
    """Save the named stages' dependencies and outputs and write their ``dvc.lock`` entries; the names committed."""
    from dvc.repo import Repo

    wanted = set(names)
    with Repo(str(root)) as repo, repo.lock:
        stages = [stage for stage in repo.index.stages if stage.name in wanted]
        for stage in stages:
            stage.save()
            stage.commit()
        by_file: dict = {}
        for stage in stages:
            by_file.setdefault(stage.dvcfile.path, (stage.dvcfile, []))[1].append(stage)
        for dvcfile, group in by_file.values():
            dvcfile.dump_stages(group, update_pipeline=False)
    return [stage.name for stage in stages]


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
