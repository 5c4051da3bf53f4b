"""Fixtures for the workflow acceptance tests: temp copies of the repository and one shared smoke run.

Workflow runs happen in a copy of the repository's files (``git ls-files``), never in the checkout.
The copy's ``params.yaml`` already holds the smoke overlay merged in, so ``snakemake`` (run with
``--configfile workflow/configs/smoke.yaml`` as CI does) and ``dvc repro`` (which reads only
``params.yaml``) see the same parameters.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
import yaml

from ..conftest import SMOKE_RUNNING

ROOT = Path(__file__).resolve().parents[2]
SMOKE = "workflow/configs/smoke.yaml"
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "relin-tests", "GIT_AUTHOR_EMAIL": "tests@relin.invalid",
                "GIT_COMMITTER_NAME": "relin-tests", "GIT_COMMITTER_EMAIL": "tests@relin.invalid"}



def _load_gen_dvc():
    spec = importlib.util.spec_from_file_location("gen_dvc", ROOT / "workflow" / "scripts" / "gen_dvc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_dvc = _load_gen_dvc()


def workflow_env(**extra: str) -> dict[str, str]:
    """The environment of a workflow run: offline, no telemetry, no inherited parent run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RELIN_")}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true",
                "DO_NOT_TRACK": "true", "DVC_NO_ANALYTICS": "1",
                "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                **GIT_IDENTITY, **extra})
    return env


def run(args: list[str], cwd: Path, check: bool = True, timeout: float = 900, **env: str):
    """Run a command in ``cwd``; on failure the assertion shows its output."""
    proc = subprocess.run(args, cwd=cwd, env=workflow_env(**env), capture_output=True, text=True, timeout=timeout)
    if check:
        assert proc.returncode == 0, f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def snakemake(cwd: Path, *args: str, overlays: tuple[Path, ...] = (), check: bool = True, **env: str):
    """``snakemake`` with the smoke config (plus ``overlays``). Targets in ``args`` come before any
    option that takes several values (``--forcerun``), which would swallow them."""
    return run(["snakemake", *args, "--cores", "2", "--configfile", SMOKE, *map(str, overlays)],
               cwd, check=check, **env)


def copy_repository(dest: Path) -> Path:
    """The repository's tracked (and not ignored) files, copied to ``dest``, with smoke params and the smoke DAG's
    ``dvc.yaml`` (:func:`smoke_dvc_yaml`), as a git repository of one commit (DVC needs one), like a user's clone."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if name == "dvc.lock":  # the record of a run in this checkout, not part of the code
            continue
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    from relin.config.params import deep_merge

    params = deep_merge(yaml.safe_load((dest / "params.yaml").read_text()),
                        yaml.safe_load((dest / SMOKE).read_text()) or {})
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    smoke_dvc_yaml(dest)
    run(["git", "init", "-q"], dest)
    run(["git", "add", "-A"], dest)
    run(["git", "commit", "-q", "-m", "copy"], dest)
    return dest


_SMOKE_DVC_YAML: dict[str, str] = {}


def smoke_dvc_yaml(repo: Path) -> None:
    """Write the smoke DAG's ``dvc.yaml`` into a copy, with the record by which an executing ``snakemake`` knows it
    is current (``relin.pipeline.dvc_sync``; the smoke overlay declares fewer models than params.yaml, so the checked-in
    ``dvc.yaml`` is not). Generated once per test process (seconds), then copied."""
    from relin.pipeline.dvc_sync import STATE

    files = ("dvc.yaml", str(STATE))
    if not _SMOKE_DVC_YAML:
        run([sys.executable, "workflow/scripts/gen_dvc.py"], repo)
        _SMOKE_DVC_YAML.update({name: (repo / name).read_text() for name in files})
        return
    for name in files:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(_SMOKE_DVC_YAML[name])


def clone_run(src: Path, dest: Path) -> Path:
    """A copy of a finished run (results, logs, Snakemake metadata, MLflow store) to mutate."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def kill_tree(proc: subprocess.Popen) -> None:
    """kill -9 of a run and everything it started, as a closed terminal or an OOM kill leaves it: each process is
    stopped before its children are listed (a stopped process starts no more), then all are killed at once."""
    stopped, todo = [], [psutil.Process(proc.pid)]
    while todo:
        process = todo.pop()
        try:
            process.suspend()
            todo.extend(process.children())
        except psutil.NoSuchProcess:
            continue
        stopped.append(process)
    for process in stopped:
        try:
            os.kill(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=60)


def relin_lines(proc) -> list[str]:
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("relin:")]


# Snakemake's notice that it read the project's workflow profile (profiles/default: relin's console plugin), printed
# first by every run: no part of what the run says about itself.
PROFILE_NOTICE = "Using workflow specific profile profiles/default for setting default command line arguments."


def console_lines(proc) -> list[str]:
    """The non-empty lines a run printed, but Snakemake's profile notice."""
    return [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip() and line != PROFILE_NOTICE]


def overlay(path: Path, mapping: dict) -> Path:
    path.write_text(yaml.safe_dump(mapping))
    return path


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory) -> Path:
    """The smoke DAG, run once end to end in a copy of the repository (shared by the tests)."""
    if not (ROOT / SMOKE).is_file():
        pytest.fail(f"{SMOKE} is missing: the smoke config defines the CI run")
    repo = copy_repository(tmp_path_factory.mktemp("smoke"))
    SMOKE_RUNNING.write_text(os.environ.get("PYTEST_XDIST_WORKER", ""))
    try:
        snakemake(repo)
    finally:
        SMOKE_RUNNING.unlink(missing_ok=True)
    return repo
