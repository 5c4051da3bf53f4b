"""Recovery that cannot lie: a plain ``snakemake`` rebuilds every output of its DAG that is missing or unfinished.

Snakemake decides what to run from the targets down: a job runs when its own target output is missing or when a
job that needs it runs. An output in the middle of the DAG that vanished (deleted, or never written because its
job was killed) is not rebuilt while the outputs made from it still exist and look up to date, so after a killed
``--forcerun`` Snakemake answers "Nothing to be done" over an empty model folder. Its incomplete markers do not
help: they count only for outputs that exist, and an atomic writer leaves none behind.

:func:`install` wraps the workflow's DAG building. Once Snakemake has decided what to run, every job of the DAG
that does not run and has an output missing (or marked incomplete by a run that died) is forced, with what
depends on it, and one line names those outputs. A job whose existing output is marked incomplete (a killed run
that wrote part of its outputs) is forced the same way instead of stopping the run with "rerun with
--rerun-incomplete". The pipeline lock (:mod:`.invocation`) makes this safe: an executing run holds it from
before the DAG is built, so the markers and Snakemake's own locks it finds belong to runs that are gone; a dry run
that finds the lock held by a live run leaves that run's jobs alone.

Nothing here knows a rule: it reads Snakemake's DAG (``workflow.dag``), its jobs' outputs and the persistence's
incomplete markers. It hooks into Snakemake's internals (``Workflow._build_dag``, ``DAG.check_incomplete``,
``DAG.forcefiles``, the persistence's marker and lock lists), which pyproject pins to Snakemake 9;
tests/workflow/test_recovery.py runs each case on a three-rule Snakefile, so a Snakemake that moves them fails there.

:func:`keep_replaced_outputs` keeps a job's previous outputs until its rerun succeeds: Snakemake deletes them before
the job starts, so a rerun that fails (a stage refusing a bad parameter) left nothing of what was there. They are set
aside instead (renamed, ``.NAME.old-<pid>``, with their manifests and Snakemake's metadata records) and put back when
the job fails, so a failed rerun changes nothing but its log; a successful one discards them. Those of a run killed
outright stay hidden until the next run of the job takes them over.
"""
from __future__ import annotations

import inspect
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..errors import UserError

# At most this many outputs named in the line; the rest are counted.
SHOWN = 6


@dataclass
class Rebuild:
    """Outputs the DAG will rebuild that Snakemake alone would have left as they are."""

    missing: list[str] = field(default_factory=list)     # absent, and no job that runs needs them
    unfinished: list[str] = field(default_factory=list)  # marked incomplete: the job's run died before it finished
    changed: list[str] = field(default_factory=list)     # its content is no longer what its job wrote (truncated)

    def __bool__(self) -> bool:
        return bool(self.missing or self.unfinished or self.changed)

    def add(self, other: Rebuild) -> None:
        for kind in ("missing", "unfinished", "changed"):
            getattr(self, kind).extend(path for path in getattr(other, kind) if path not in getattr(self, kind))

    def line(self, dryrun: bool) -> str:
        """One line naming the outputs (the first :data:`SHOWN` of them) and what happens to them."""
        named = [f"{path} (unfinished: its run was interrupted)" for path in self.unfinished]
        named += [f"{path} (changed since its job wrote it)" for path in self.changed]
        named += [f"{path} (missing)" for path in self.missing]
        shown = ", ".join(named[:SHOWN]) + (f" and {len(named) - SHOWN} more" if len(named) > SHOWN else "")
        verb = "will rebuild" if dryrun else "rebuilding"
        return f"relin: {verb} {len(named)} missing, unfinished or changed output(s) and what depends on them: {shown}"


def _outputs(job) -> list:
    """The job's outputs that must exist once it ran (temporary, pipe and service outputs need not)."""
    from snakemake.io import is_flagged

    return [f for f in job.output if not any(is_flagged(f, flag) for flag in ("temp", "pipe", "service"))]


def _marked(persistence, files: list) -> set[str]:
    """The keys among ``files`` that carry an incomplete marker, whether or not the file exists."""
    try:
        return persistence._filter_incomplete_keys([persistence._get_key(f) for f in files])
    except AttributeError:  # a persistence backend without markers of missing files: existing ones still count
        return set()


async def unfinished_outputs(dag) -> list:
    """Existing outputs of the DAG's jobs marked incomplete (a run died while writing them)."""
    found = []
    for job in dag.jobs:
        found.extend(await dag.workflow.persistence.incomplete(job))
    return found


async def left_behind(dag) -> tuple[list, Rebuild]:
    """The DAG's jobs that will not run although an output of theirs is missing (unfinished when an incomplete
    marker says its run died) or no longer holds what their job wrote (:func:`changed_since_written`)."""
    persistence = dag.workflow.persistence
    jobs, rebuild = [], Rebuild()
    for job in dag.jobs:
        if dag.needrun(job):
            continue
        outputs = _outputs(job)
        gone = [f for f in outputs if not await f.exists()]
        changed = [f for f in outputs if f not in gone and changed_since_written(f)]
        if not gone and not changed:
            continue
        jobs.append(job)
        marked = _marked(persistence, gone)
        for f in gone:
            (rebuild.unfinished if persistence._get_key(f) in marked else rebuild.missing).append(str(f))
        rebuild.changed += map(str, changed)
    return jobs, rebuild


def interrupted_reruns(dag) -> list[str]:
    """Outputs of jobs that run anyway (their own output is a missing target) while an incomplete marker says a run
    of theirs died: named in the line too, so a resumed job is seen on the console, not only in its log."""
    persistence, found = dag.workflow.persistence, []
    for job in dag.needrun_jobs():
        outputs = _outputs(job)
        marked = _marked(persistence, outputs)
        found += [str(f) for f in outputs if persistence._get_key(f) in marked]
    return found


def changed_since_written(path) -> bool:
    """Whether an output's files differ from what its stage recorded when it wrote them (the manifest beside it: the
    files' sizes and times, then their digest; a damaged or truncated file). A digest that still matches (a copy
    that kept the content) refreshes the recorded times, so it is read once."""
    from ..io import atomic_write_json, digest, file_stats, manifest_path, read_manifest

    record = read_manifest(path)
    if "files" not in record or "digest" not in record:
        return False            # written before manifests recorded files, or by no stage
    stats = file_stats(path)
    if stats == record["files"]:
        return False
    if digest(path) != record["digest"]:
        return True
    atomic_write_json(manifest_path(path), {**record, "files": stats})
    return False


def applies(workflow) -> bool:
    """Whether this invocation decides what to run from the files on disk: a run or dry run of the main process,
    not a ``--forceall`` (everything runs), ``--until``/``--omit-from`` (deliberately partial) or ``--touch``."""
    settings = workflow.dag_settings
    return (workflow.executor_plugin is not None and workflow.is_main_process and not workflow.touch
            and not settings.forceall and not settings.until and not settings.omit_from)


def executing(workflow) -> bool:
    """A run that executes jobs (not a dry run, ``--touch``, or a job step of a cluster run)."""
    return applies(workflow) and not workflow.dryrun


def clear_stale_locks(workflow) -> bool:
    """Remove Snakemake's locks in this checkout; call only while holding the pipeline lock, which every run that
    locks holds first (:meth:`.invocation.Pipeline.hold`): any lock found then was left by a killed run."""
    persistence = workflow.persistence
    try:
        stale = any(True for _ in persistence._read_locks())
    except (AttributeError, OSError):
        return False
    if stale:
        persistence.cleanup_locks()
        if lockdir := getattr(persistence, "_lockdir", None):  # the file backend removes its folder, made at start
            os.makedirs(lockdir, exist_ok=True)
    return stale


def install(workflow, before: Callable[[], None], others_running: Callable[[], bool]) -> None:
    """Wrap ``workflow._build_dag`` (Snakemake builds the DAG and decides what runs there, before it locks the
    outputs or schedules anything).

    ``before`` runs first in an executing run (it takes the pipeline lock, see :mod:`relin.pipeline.invocation`); a
    :class:`UserError` it raises ends the run in one line. ``others_running()`` tells a dry run whether a live run
    holds the checkout: that run's jobs are unfinished, not left behind."""
    build = workflow._build_dag

    def build_dag() -> None:
        if executing(workflow):
            try:
                before()
            except UserError as err:
                sys.exit(f"relin: {err}")
            if clear_stale_locks(workflow):
                print("relin: removed Snakemake's locks left by a run that is no longer running", file=sys.stderr)
        if not (applies(workflow) and (executing(workflow) or not others_running())):
            build()
            return
        dag, rebuild = workflow.dag, Rebuild()
        if not dag.ignore_incomplete:
            _force_unfinished(dag, rebuild)
        build()
        if not dag.ignore_incomplete:
            rebuild.add(Rebuild(unfinished=interrupted_reruns(dag)))
        jobs, behind = workflow.async_run(left_behind(dag))
        if jobs:
            for job in jobs:
                dag.forcefiles.update(job.output)
            workflow.async_run(dag.update_needrun())
            dag.update_jobids()
        rebuild.add(behind)
        if rebuild:
            print(rebuild.line(workflow.dryrun), file=sys.stderr)

    workflow._build_dag = build_dag


def _force_unfinished(dag, rebuild: Rebuild) -> None:
    """Force the jobs whose existing outputs are marked incomplete, where Snakemake would stop and ask for
    ``--rerun-incomplete``: replaces the DAG's incomplete check, which runs once the DAG's jobs are known and
    before it decides what runs."""

    async def check_incomplete() -> None:
        found = await unfinished_outputs(dag)
        dag.forcefiles.update(found)
        rebuild.unfinished += sorted(map(str, found))

    dag.check_incomplete = check_incomplete


@dataclass
class SetAside:
    """An output of a job about to run, renamed out of the way, with what describes it."""

    path: Path
    backup: Path
    manifest: Path | None        # the manifest beside it, set aside too (relin.io.manifest_path)
    key: str                     # Snakemake's metadata key of the output
    record: Any                  # its metadata record (None when it had none)


def keep_replaced_outputs() -> None:
    """Make every job of this Snakemake process set its existing outputs aside instead of deleting them before it
    runs, and put them back (outputs, manifests, metadata) when it fails (module docstring)."""
    from snakemake.jobs import Job

    if getattr(Job, "_relin_keeps_outputs", False):
        return
    remove, postprocess = Job.remove_existing_output, Job.postprocess
    parameters = inspect.signature(postprocess)

    async def remove_existing_output(job) -> None:
        _UNSETTLED[id(job)] = (job, set_aside(job))
        await remove(job)           # the logs, and any output not set aside

    async def postprocess_(job, *args, **kwargs) -> None:
        await postprocess(job, *args, **kwargs)
        _, aside = _UNSETTLED.pop(id(job), (None, []))
        if aside:
            error = parameters.bind(job, *args, **kwargs).arguments.get("error", False)
            put_back(job, aside, "failed") if error else discard(aside)

    Job.remove_existing_output, Job.postprocess = remove_existing_output, postprocess_
    Job._relin_keeps_outputs = True


# Jobs whose outputs are set aside and that have not ended yet: a run stopped by Ctrl-C ends them without Snakemake's
# postprocessing, and puts their outputs back at its end (put_back_unsettled).
_UNSETTLED: dict[int, tuple[Any, list[SetAside]]] = {}


def put_back_unsettled() -> None:
    """At the end of a run that failed or was stopped (the Snakefile's ``onerror``): the outputs set aside by jobs
    that never ended (interrupted) back in place. Their incomplete markers stay, so the next run rebuilds them."""
    while _UNSETTLED:
        _, (job, aside) = _UNSETTLED.popitem()
        put_back(job, aside, "was stopped")


def set_aside(job) -> list[SetAside]:
    """Rename the job's existing local outputs (and their manifests) to hidden siblings; returns what moved."""
    from snakemake.io import is_flagged

    from ..io import clear_stale_temporaries, manifest_path

    persistence, moved = job.dag.workflow.persistence, []
    for f in job.output:
        path = Path(f)
        if f.is_storage or any(is_flagged(f, flag) for flag in ("update", "pipe", "service")):
            continue
        manifest = manifest_path(path)
        if not (path.exists() or path.is_symlink()):
            _take_over_killed_backup(path, manifest)
        clear_stale_temporaries(path)       # the backups of runs that were killed
        clear_stale_temporaries(manifest)
        if not (path.exists() or path.is_symlink()):
            continue
        key = persistence._get_key(f)
        kept = SetAside(path, _backup_of(path), manifest if manifest.is_file() else None, key,
                        persistence._read_record(key))
        discard([kept])             # a backup left under this pid by an earlier process that had it (pid reuse)
        path.rename(kept.backup)
        if kept.manifest is not None:
            kept.manifest.rename(_backup_of(kept.manifest))
        moved.append(kept)
    return moved


def _take_over_killed_backup(path: Path, manifest: Path) -> None:
    """A run killed outright (no ``onerror``) leaves the output its job had set aside hidden under the dead pid: back
    in place (newest first, with its manifest), to be set aside by this run and kept until its new output exists."""
    from ..io import stale_temporaries

    backups = sorted(stale_temporaries(path, "old"), key=lambda p: p.lstat().st_mtime, reverse=True)
    if not backups:
        return
    backups[0].rename(path)
    kept_manifest = manifest.with_name(f".{manifest.name}.old-{backups[0].name.rpartition('-')[2]}")
    if kept_manifest.exists() and not manifest.exists():
        kept_manifest.rename(manifest)


def _backup_of(path: Path) -> Path:
    return path.with_name(f".{path.name}.old-{os.getpid()}")


def put_back(job, aside: list[SetAside], what: str) -> None:
    """After the job failed (Snakemake removed what it wrote) or ``was stopped``: every output set aside back in place
    with its manifest and metadata record, so the run left it as it found it; one line says so."""
    persistence, restored = job.dag.workflow.persistence, []
    for kept in aside:
        if kept.path.exists() or kept.path.is_symlink():
            discard([kept])         # --keep-incomplete kept the failed job's own output
            continue
        if not (kept.backup.exists() or kept.backup.is_symlink()):
            continue                # removed by hand meanwhile: nothing to put back
        kept.backup.rename(kept.path)
        if kept.manifest is not None and _backup_of(kept.manifest).exists():
            _backup_of(kept.manifest).rename(kept.manifest)
        if kept.record is not None:
            persistence._write_record(kept.key, kept.record)
        else:
            persistence._delete_record(kept.key)
        restored.append(str(kept.path))
    persistence._clear_cache()
    if restored:
        print(f"relin: {job.rule.name} {what}; its previous output is kept: {', '.join(restored)}", file=sys.stderr)


def discard(aside: list[SetAside]) -> None:
    """The rerun succeeded (or left its own output): the outputs set aside go."""
    for kept in aside:
        for path in (kept.backup, *([_backup_of(kept.manifest)] if kept.manifest is not None else [])):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
