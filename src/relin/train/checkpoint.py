"""Resumable checkpoints: keyed by everything that determines the run, published atomically.

A training run's checkpoints live in ``<root>/<key>/``, where the key digests the run's identity:
its config sections, the digests of the artifacts it reads and the digest of the code it runs
(:func:`run_identity`). A rerun after a kill finds its own checkpoints and resumes; a run with any
other input, parameter or code starts from step 0, because its key names another directory. When
a run has written its outputs it removes its checkpoints (:func:`release`): they exist only to
survive a kill, and a finished run's checkpoint can never stand in for a new run.

Layout of one run's directory::

    identity.json         what the key digests (for people)
    step-000200/          a complete checkpoint (backend files + trainer.json); the newest two are kept
    step-000400/
    .staging-000600/      being written; renamed to step-000600 once every rank has finished

A kill while writing leaves only a staging directory, which the next save clears. A checkpoint that
cannot be read (truncated, corrupt) is skipped for the one before it.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..errors import InputError
from .distributed import DistEnv, barrier

STEP_DIR = re.compile(r"^step-(\d+)$")
TRAINER_STATE = "trainer.json"
IDENTITY = "identity.json"
KEEP = 2


def run_identity(config: dict[str, Any], inputs: list[str | Path], code_module: str) -> dict[str, Any]:
    """What determines a training run's result: config sections, input digests, code, library versions."""
    import platform

    import transformers

    from ..io import digest
    from ..pipeline.codedeps import code_digest

    return {"config": config, "inputs": {str(path): digest(path) for path in inputs},
            "code": {code_module: code_digest(code_module)},
            "versions": {"python": platform.python_version(), "torch": torch.__version__,
                         "transformers": transformers.__version__}}


def run_key(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:16]


def run_directory(root: str | os.PathLike, identity: dict[str, Any], env: DistEnv) -> Path:
    """``root/<key of identity>``, with ``identity.json`` written (rank 0) for whoever looks inside."""
    path = Path(root) / run_key(identity)
    if env.is_main:
        path.mkdir(parents=True, exist_ok=True)
        if not (path / IDENTITY).is_file():
            (path / IDENTITY).write_text(json.dumps(identity, indent=2, sort_keys=True, default=str) + "\n")
    barrier()
    return path


def release(run_dir: str | os.PathLike, env: DistEnv) -> None:
    """Remove a finished run's checkpoints (rank 0, after its outputs are written)."""
    barrier()
    if env.is_main:
        shutil.rmtree(run_dir, ignore_errors=True)


class CheckpointDir:
    """The checkpoint directory of one training run."""

    def __init__(self, root: str | os.PathLike, env: DistEnv):
        self.root, self.env = Path(root), env

    def complete(self) -> list[tuple[int, Path]]:
        """``(step, directory)`` of every complete checkpoint, newest first."""
        if not self.root.is_dir():
            return []
        found = [(int(m.group(1)), p) for p in self.root.iterdir()
                 if (m := STEP_DIR.match(p.name)) and (p / TRAINER_STATE).is_file()]
        return sorted(found, reverse=True)

    def latest(self) -> tuple[int, Path] | None:
        complete = self.complete()
        return complete[0] if complete else None

    def staging(self, step: int) -> Path:
        """A fresh directory that every rank writes its part of the checkpoint into."""
        path = self.root / f".staging-{step:06d}"
        if self.env.is_main:
            for stale in self.root.glob(".staging-*") if self.root.is_dir() else ():
                shutil.rmtree(stale, ignore_errors=True)
            path.mkdir(parents=True)
        barrier()
        return path

    def publish(self, step: int, staging: Path, trainer_state: dict[str, Any]) -> Path:
        """Make ``staging`` the latest checkpoint (rank 0 renames), then drop all but the newest ``KEEP``."""
        barrier()
        final = self.root / f"step-{step:06d}"
        if self.env.is_main:
            (staging / TRAINER_STATE).write_text(json.dumps(trainer_state))
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
            for _, old in self.complete()[KEEP:]:
                shutil.rmtree(old, ignore_errors=True)
        barrier()
        return final

    @staticmethod
    def trainer_state(path: Path) -> dict[str, Any]:
        try:
            return json.loads((path / TRAINER_STATE).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise InputError(f"checkpoint {path / TRAINER_STATE}: unreadable ({err})") from None


def rng_state() -> dict[str, Any]:
    """Every RNG the loop draws from, as tensors and plain values (loadable with ``weights_only=True``)."""
    version, mt_state, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": [version, torch.tensor(mt_state, dtype=torch.int64), gauss],
             "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, cached],
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    version, mt_state, gauss = state["python"]
    random.setstate((version, tuple(mt_state.tolist()), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
