"""The one training loop: any objective, either backend, resumable, stops cleanly on divergence.

Each optimizer step draws ``grad_accum`` micro-batches from a :class:`BatchSource`, scales every
micro-batch's summed loss by the objective's targets of the whole step (over all ranks), so
accumulation and data parallelism equal one big batch, then clips, updates and advances the lr
schedule (:mod:`.step`). Every ``checkpoint_every`` steps and at the end the full state is checkpointed
(:class:`~.run_state.RunState`); a rerun with the same checkpoint root continues from there.
Metrics stay on the device until a step logs, checkpoints or adapts its source (:mod:`.metrics`), so the host never
waits on the GPU in between. A NaN/inf loss raises :class:`~relin.errors.TrainingDiverged` naming its step (whose
update was dropped with its non-finite gradient) before any later checkpoint, leaving the last good one untouched;
so does a NaN/inf gradient norm beyond ``skip_nonfinite_steps`` dropped updates.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..config.train import TrainConfig
from ..tracking import NullTracker
from .batch_source import AdaptiveSource, BatchSource, CostedSource
from .checkpoint import CheckpointDir
from .distributed import DistEnv, dist_env
from .engine import make_engine, prepare_model
from .metrics import IntervalMeter, NonFiniteSteps, PendingMetrics
from .objectives import Objective
from .progress import Progress
from .run_state import RunState
from .step import count_tokens, optimizer_step, symbolic_shapes


@dataclass
class TrainResult:
    model: torch.nn.Module
    history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    final_loss: float = float("nan")
    wall_s: float = 0.0
    resumed_from: int = 0
    budget: dict = field(default_factory=dict)


def train(model: torch.nn.Module, objective: Objective, batches: BatchSource, cfg: TrainConfig, *,
          checkpoint_root: str | Path, tracker: NullTracker | None = None, env: DistEnv | None = None,
          progress: bool = True) -> TrainResult:
    """Train ``model`` for ``cfg.steps`` optimizer steps.

    Resumes from the newest readable checkpoint under ``checkpoint_root`` (a run's keyed directory,
    :func:`~relin.train.checkpoint.run_directory`) when there is one. Returns the
    unwrapped model (on the training device) and the logged history (one row per ``log_every``).
    """
    env = env or dist_env()
    tracker = tracker if tracker is not None and env.is_main else NullTracker()
    device = prepare_model(model, objective, cfg, env)
    engine = make_engine(model, cfg, env, device)
    checkpoints = CheckpointDir(checkpoint_root, env)
    run = RunState.resume(engine, checkpoints, device, env, batches)
    shown = Progress(tracker, cfg.steps, run.start, show=progress and env.is_main)
    run.start_clock()
    meter, pending, nonfinite = IntervalMeter(), PendingMetrics(), NonFiniteSteps(cfg.skip_nonfinite_steps, run.skipped)
    adaptive, symbolic = isinstance(batches, AdaptiveSource), symbolic_shapes(cfg, device)
    for step in range(run.start + 1, cfg.steps + 1):
        micro = batches.micro_batches(step, cfg.grad_accum)
        if step == run.start + 1:
            objective.check_batch(micro[0])
        targets, read = count_tokens(objective, micro, env, device)
        run.budget.add(int(read), int(targets))
        meter.tokens += int(read)
        names, values, lr = optimizer_step(engine, objective, micro, targets, env, device, symbolic)
        pending.push(step, names, values)
        shown.advance()
        logs = step % cfg.log_every == 0 or step == cfg.steps
        if adaptive or logs or step % cfg.checkpoint_every == 0:
            for settled, metrics, norm in pending.read():
                metrics = objective.finalize(metrics)
                if problem := nonfinite.problem(metrics, norm):
                    shown.close()
                    raise run.diverged(problem, settled)
                if adaptive:
                    metrics.update(batches.observe(settled, metrics))
                meter.add(metrics)
        if logs:
            now = time.perf_counter()
            row = {"step": step, **meter.means(), "lr": lr, "tokens_per_s": meter.tokens_per_s(now),
                   "max_len": batches.max_len(step), "elapsed_s": run.elapsed(now)}
            if cfg.skip_nonfinite_steps:
                row["skipped_steps"] = nonfinite.skipped
            run.history.append(row)
            shown.log(row)
            meter.restart(now)
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            run.save(step, engine, checkpoints, batches)
    shown.close()
    spent = run.budget.as_dict()
    if isinstance(batches, CostedSource):
        spent.update(batches.budget())
    return TrainResult(model=engine.module, history=run.history, steps=cfg.steps,
                       final_loss=run.history[-1]["loss"] if run.history else float("nan"),
                       wall_s=run.elapsed(time.perf_counter()), resumed_from=run.start, budget=spent)
