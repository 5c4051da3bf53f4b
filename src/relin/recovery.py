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
--rerun-incomplete". The pipeline lock (:mod:`relin.pipeline`) makes this safe: an executing run holds it from
before the DAG is built, so the markers and Snakemake's own locks it finds belong to runs that are gone; a dry run
that finds the lock held by a live run leaves that run's jobs alone.

Nothing here knows a rule: it reads Snakemake's DAG (``workflow.dag``), its jobs' outputs and the persistence's
incomplete markers. It hooks into Snakemake's internals (``Workflow._build_dag``, ``DAG.check_incomplete``,
``DAG.forcefiles``, the persistence's marker and lock lists), which pyproject pins to Snakemake 9;
tests/workflow/test_recovery.py runs each case on a three-rule Snakefile, so a Snakemake that moves them fails there.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable

from .errors import UserError

# At most this many outputs named in the line; the rest are counted.
SHOWN = 6


@dataclass
class Rebuild:
    """Outputs the DAG will rebuild that Snakemake alone would have left as they are."""

    missing: list[str] = field(default_factory=list)     # absent, and no job that runs needs them
    unfinished: list[str] = field(default_factory=list)  # marked incomplete: the job's run died before it finished

    def __bool__(self) -> bool:
        return bool(self.missing or self.unfinished)

    def line(self, dryrun: bool) -> str:
        """One line naming the outputs (the first :data:`SHOWN` of them) and what happens to them."""
        named = [f"{path} (unfinished: its run was interrupted)" for path in self.unfinished]
        named += [f"{path} (missing)" for path in self.missing]
        shown = ", ".join(named[:SHOWN]) + (f" and {len(named) - SHOWN} more" if len(named) > SHOWN else "")
        verb = "will rebuild" if dryrun else "rebuilding"
        return f"relin: {verb} {len(named)} missing or unfinished output(s) and what depends on them: {shown}"


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
    marker says its run died)."""
    persistence = dag.workflow.persistence
    jobs, rebuild = [], Rebuild()
    for job in dag.jobs:
        if dag.needrun(job):
            continue
        gone = [f for f in _outputs(job) if not await f.exists()]
        if not gone:
            continue
        jobs.append(job)
        marked = _marked(persistence, gone)
        for f in gone:
            (rebuild.unfinished if persistence._get_key(f) in marked else rebuild.missing).append(str(f))
    return jobs, rebuild


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
    locks holds first (:meth:`relin.pipeline.Pipeline.hold`): any lock found then was left by a killed run."""
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

    ``before`` runs first in an executing run (it takes the pipeline lock, see :mod:`relin.pipeline`); a
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
        jobs, behind = workflow.async_run(left_behind(dag))
        if jobs:
            for job in jobs:
                dag.forcefiles.update(job.output)
            workflow.async_run(dag.update_needrun())
            dag.update_jobids()
        rebuild.unfinished += behind.unfinished
        rebuild.missing += behind.missing
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
