"""The one header of every benchmark JSON: which code ran, on what machine, with which libraries, when.

A figure is only worth keeping if the code that produced it can be checked out again, so a benchmark refuses
to start on a tree that differs from its commit (one line, exit 1) unless it is told ``--allow-dirty``, which
marks its JSON ``"dirty": true``::

    Envelope.add_argument(parser)                                            # --allow-dirty
    args = parser.parse_args()
    envelope = Envelope.start("kernel_bench", allow_dirty=args.allow_dirty)   # refuses here, before any timing
    ...
    envelope.write(out / "kernels.json", {"rows": rows})    # {"envelope": {...}, "rows": [...]}

The tree is the git checkout of the current directory, unless ``RELIN_GIT_COMMIT`` and ``RELIN_GIT_DIRTY`` name
it, as ``python -m relin.envelope`` prints them where the checkout is: a lent GPU machine gets the tree without
``.git``, or with a ``.git`` of another commit under the copied files, so a commit named there wins. Untracked
files that git does not ignore count too: a new benchmark script, or a module it imports, is no part of the commit
the JSON would name.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from .io import atomic_write_text

COMMIT_ENV, DIRTY_ENV = "RELIN_GIT_COMMIT", "RELIN_GIT_DIRTY"
VERSIONS = ("torch", "triton", "transformers")


def git_state(root: str | Path = ".") -> tuple[str | None, bool | None]:
    """(commit, dirty) as the environment names them, else of the checkout at ``root``; None where unknown."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    if not os.environ.get(COMMIT_ENV):
        try:
            return git("rev-parse", "HEAD"), bool(git("status", "--porcelain"))
        except (OSError, subprocess.CalledProcessError):
            pass
    dirty = os.environ.get(DIRTY_ENV, "").strip().lower()
    return (os.environ.get(COMMIT_ENV) or None,
            {"0": False, "false": False, "1": True, "true": True}.get(dirty))


def versions(packages: tuple[str, ...] = ()) -> dict[str, str | None]:
    """Python and each distribution's installed version (None when it is not installed), without importing it."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in (*VERSIONS, *packages):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def gpus() -> tuple[str | None, int]:
    """The first CUDA device's name and the device count; (None, 0) on a machine without one."""
    import torch

    if not torch.cuda.is_available():
        return None, 0
    return torch.cuda.get_device_name(0), torch.cuda.device_count()


@dataclass(frozen=True)
class Envelope:
    """What is known when a run starts; :meth:`record` adds the machine and libraries when it is written."""

    benchmark: str
    commit: str | None
    dirty: bool
    date_utc: str
    argv: tuple[str, ...]
    packages: tuple[str, ...] = ()  # versions to record beside python, torch, triton and transformers

    @staticmethod
    def add_argument(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--allow-dirty", action="store_true",
                            help="measure a tree that differs from its commit (or whose state is unknown); "
                                 "the JSON says dirty")

    @classmethod
    def start(cls, benchmark: str, *, allow_dirty: bool = False, packages: tuple[str, ...] = (),
              root: str | Path = ".") -> Envelope:
        """The envelope of a run starting now; exits with one line when the tree is not its commit."""
        commit, dirty = git_state(root)
        if dirty is not False and not allow_dirty:
            why = ("the git tree differs from its commit" if dirty else
                   f"no git checkout here and {COMMIT_ENV} / {DIRTY_ENV} do not say the tree is a commit")
            sys.exit(f"{benchmark}: refusing to measure: {why} (commit it, or pass --allow-dirty to mark the "
                     f"JSON dirty)")
        return cls(benchmark=benchmark, commit=commit, dirty=dirty is not False,
                   date_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"), argv=tuple(sys.argv),
                   packages=tuple(packages))

    def record(self) -> dict:
        """The header as written. The GPU is read now, after the run, so that a benchmark whose child processes
        use it has not initialised CUDA in the parent before they start."""
        gpu, gpu_count = gpus()
        return {"benchmark": self.benchmark, "commit": self.commit, "dirty": self.dirty, "gpu": gpu,
                "gpu_count": gpu_count, "host": {"machine": platform.machine(), "cpus": os.cpu_count()},
                "versions": versions(self.packages), "date_utc": self.date_utc, "argv": list(self.argv)}

    def write(self, path: str | Path, payload: dict) -> Path:
        """``{"envelope": ..., **payload}`` as indented JSON at ``path`` (written whole or not at all)."""
        if "envelope" in payload:
            raise ValueError("a benchmark's payload has its own 'envelope' key")
        return atomic_write_text(path, json.dumps({"envelope": self.record(), **payload}, indent=1) + "\n")


def main() -> None:
    """Print the variables that name this checkout's tree on a machine that gets it without ``.git``."""
    commit, dirty = git_state()
    if commit is None:
        sys.exit("relin.envelope: not in a git checkout")
    print(f"{COMMIT_ENV}={commit} {DIRTY_ENV}={int(bool(dirty))}")


if __name__ == "__main__":
    main()
