"""What a training run carries from one process to the next through its checkpoints: the step it reached, its
history, its wall time and budget (the engine saves the model, optimizer and RNG beside them)."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..errors import InputError, TrainingDiverged
from .batch_source import AdaptiveSource, BatchSource
from .budget import Budget
from .checkpoint import CheckpointDir
from .distributed import DistEnv, all_reduce_sum
from .engine import Engine


def resume(engine: Engine, checkpoints: CheckpointDir, device: torch.device,
           env: DistEnv) -> tuple[dict, Path] | None:
    """Load the newest checkpoint every rank can read: ``(trainer state, directory)``, or ``None``.

    An unreadable checkpoint (truncated, corrupt) is reported in one line and the one before it is
    tried; when none loads, the run stops with one line saying what to delete.
    """
    candidates, reason = checkpoints.complete(), ""
    for _, path in candidates:
        try:
            state = checkpoints.trainer_state(path)
            engine.load(path)
            failed = 0.0
        except Exception as err:  # noqa: BLE001 - any failure to load means this checkpoint is unusable
            failed, reason = 1.0, (str(err).strip().splitlines() or [type(err).__name__])[0]
        if all_reduce_sum(torch.tensor(failed, device=device)).item() == 0:
            if env.is_main:
                print(f"resuming from step {state['step']} ({path})", file=sys.stderr)
            return state, path
        if env.is_main:
            print(f"relin: checkpoint {path}: unreadable ({reason}); trying an earlier one", file=sys.stderr)
    if candidates:
        raise InputError(f"checkpoint {candidates[-1][1]}: unreadable ({reason}), like every later one; delete "
                         f"{checkpoints.root} to train from step 0")
    return None


@dataclass
class RunState:
    """A run's state across resumes: ``start``, the step this process resumed from (0 for a fresh run), the
    logged ``history``, the wall time ``wall_s`` spent before this process, the ``budget`` and the newest
    checkpoint ``saved`` (``None`` until one exists)."""

    start: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    wall_s: float = 0.0
    budget: Budget = field(default_factory=Budget)
    saved: Path | None = None
    began: float = 0.0

    @classmethod
    def resume(cls, engine: Engine, checkpoints: CheckpointDir, device: torch.device, env: DistEnv,
               batches: BatchSource) -> RunState:
        """The state of the newest readable checkpoint (the engine and an adaptive source restored from it too),
        or a fresh run's."""
        if (resumed := resume(engine, checkpoints, device, env)) is None:
            return cls()
        state, saved = resumed
        if state.get("source") is not None:
            batches.load_state_dict(state["source"])
        return cls(state["step"], state["history"], state["wall_s"], Budget(**state["budget"]), saved)

    @property
    def skipped(self) -> int:
        """Non-finite steps skipped so far (the newest history row counts them)."""
        return int(self.history[-1].get("skipped_steps", 0)) if self.history else 0

    def start_clock(self) -> None:
        self.began = time.perf_counter()

    def elapsed(self, now: float) -> float:
        """Wall seconds of the whole run at ``now`` (a ``time.perf_counter()`` reading)."""
        return self.wall_s + now - self.began

    def save(self, step: int, engine: Engine, checkpoints: CheckpointDir, batches: BatchSource) -> None:
        """Checkpoint after step ``step``: the engine's files, then this state, published together."""
        staging = checkpoints.staging(step)
        engine.save(staging)
        self.saved = checkpoints.publish(step, staging, {
            "step": step, "history": self.history, "wall_s": self.elapsed(time.perf_counter()),
            "source": batches.state_dict() if isinstance(batches, AdaptiveSource) else None,
            "budget": self.budget.as_dict()})

    def diverged(self, what: str, step: int) -> TrainingDiverged:
        """The error that stops a run at step ``step``, naming the checkpoint it leaves untouched."""
        kept = f"last good checkpoint kept at {self.saved}" if self.saved else "no checkpoint written yet"
        return TrainingDiverged(f"{what} at step {step}; {kept}")
