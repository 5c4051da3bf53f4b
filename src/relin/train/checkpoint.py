"""Resumable checkpoints: one directory per saved step, published atomically, only the last kept.

Layout under the run's checkpoint root::

    step-000200/          the latest complete checkpoint (backend files + trainer.json)
    .staging-000400/      being written; renamed to step-000400 once every rank has finished

A kill while writing leaves only a staging directory, which the next save clears; the previous
``step-*`` directory stays valid until the new one is in place.
"""
from __future__ import annotations

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


class CheckpointDir:
    """The checkpoint root of one training run."""

    def __init__(self, root: str | os.PathLike, env: DistEnv):
        self.root, self.env = Path(root), env

    def latest(self) -> tuple[int, Path] | None:
        """``(step, directory)`` of the newest complete checkpoint, if any."""
        if not self.root.is_dir():
            return None
        found = [(int(m.group(1)), p) for p in self.root.iterdir()
                 if (m := STEP_DIR.match(p.name)) and (p / TRAINER_STATE).is_file()]
        return max(found) if found else None

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
        """Make ``staging`` the latest checkpoint (rank 0 renames), then drop older ones."""
        barrier()
        final = self.root / f"step-{step:06d}"
        if self.env.is_main:
            (staging / TRAINER_STATE).write_text(json.dumps(trainer_state))
            shutil.rmtree(final, ignore_errors=True)
            staging.rename(final)
            for p in self.root.iterdir():
                if STEP_DIR.match(p.name) and p != final:
                    shutil.rmtree(p, ignore_errors=True)
        barrier()
        return final

    @staticmethod
    def trainer_state(path: Path) -> dict[str, Any]:
        try:
            return json.loads((path / TRAINER_STATE).read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise InputError(f"checkpoint {path}: unreadable {TRAINER_STATE} ({err}); delete the "
                             f"directory to start over") from None


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
