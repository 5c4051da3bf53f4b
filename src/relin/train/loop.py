"""The one training loop: any objective, either backend, resumable, stops cleanly on divergence.

Each optimizer step draws ``grad_accum`` micro-batches from a :class:`BatchSource`, scales every
micro-batch's summed loss by the objective's targets of the whole step (over all ranks), so
accumulation and data parallelism equal one big batch, then clips, updates and advances the lr
schedule. Every ``checkpoint_every`` steps and at the
end the full state is checkpointed; a rerun with the same checkpoint root continues from there.
Metrics stay on the device until a step logs, checkpoints or adapts its source, so the host never waits on the GPU
in between. A NaN/inf loss raises :class:`~relin.errors.TrainingDiverged` naming its step (whose update was dropped
with its non-finite gradient) before any later checkpoint, leaving the last good one untouched; so does a NaN/inf
gradient norm beyond ``skip_nonfinite_steps`` dropped updates.
"""
from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import torch

from ..errors import InputError, TrainingDiverged
from ..tracking import NullTracker
from .checkpoint import CheckpointDir
from .distributed import DistEnv, all_reduce_sum, device_for, dist_env, init_process_group
from .objectives import Objective
from .schedules import lr_multiplier


class BatchSource(Protocol):
    """Where a training run's micro-batches come from (:class:`~relin.train.batching.StepBatches`
    for dataset rows; image-text pairs and on-policy rollouts bring their own).

    A source must be deterministic in ``step`` (a resumed run sees the batches an uninterrupted run
    would) and give each rank its own share. Batches are dicts of ``[B, ...]`` tensors holding at
    least what the objective ``requires``.
    """

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        """The ``count`` micro-batches of optimizer step ``step`` (1-based) for this rank."""

    def max_len(self, step: int) -> int:
        """The longest sequence step ``step`` may hold (logged; a curriculum raises it)."""



@runtime_checkable
class AdaptiveSource(Protocol):
    """A :class:`BatchSource` that adapts to training (on-policy rollouts and their horizon curriculum)."""

    def observe(self, step: int, metrics: dict[str, float]) -> dict[str, float]:
        """After each step: its reduced metrics in, extra metrics to log out."""

    def state_dict(self) -> dict:
        """Saved in every checkpoint."""

    def load_state_dict(self, state: dict) -> None:
        """Restored from the checkpoint a run resumes from."""


@runtime_checkable
class CostedSource(Protocol):
    """A :class:`BatchSource` whose batches cost something beyond the training forward (rollout tokens)."""

    def budget(self) -> dict:
        """What producing the batches cost, added to the run's :class:`Budget`."""


class Engine(Protocol):
    """An optimizer backend (:class:`~relin.train.torch_backend.TorchEngine`, DeepSpeed ZeRO-2): ``model`` runs the
    forward (wrapped for data parallelism), ``module`` is the bare model."""

    model: torch.nn.Module
    module: torch.nn.Module

    def micro_step(self, last: bool):
        """Context of one micro-batch's forward and backward."""

    def backward(self, loss: torch.Tensor, last: bool) -> None: ...

    def step(self) -> torch.Tensor | float:
        """Clip, update, advance the schedule; the pre-clip gradient norm (a device tensor the loop reads later, or
        a float). A non-finite one either drops the update and is returned (torch) or raises
        :class:`~relin.errors.TrainingDiverged` (DeepSpeed, whose update comes before its norm)."""

    def lr(self) -> float: ...

    def save(self, directory: Path) -> None: ...

    def load(self, directory: Path) -> None: ...


def _to_device(tensor: torch.Tensor, device: torch.device, symbolic: bool) -> torch.Tensor:
    """A batch tensor on the training device; from page-locked memory on a GPU, so the copy joins the stream's
    queue instead of waiting for it. ``symbolic`` marks its batch and sequence sizes dynamic for ``torch.compile``."""
    if device.type == "cuda" and tensor.device.type == "cpu":
        tensor = tensor.pin_memory().to(device, non_blocking=True)
    else:
        tensor = tensor.to(device)
    if symbolic and tensor.dim() >= 2:
        torch._dynamo.maybe_mark_dynamic(tensor, 0)
        torch._dynamo.maybe_mark_dynamic(tensor, 1)
    return tensor


def _source_state(batches) -> dict | None:
    return batches.state_dict() if isinstance(batches, AdaptiveSource) else None


@dataclass
class Budget:
    """What a run consumed, counted exactly over all ranks: optimizer steps, tokens the model read in its
    training forward passes (prompts included, padding not), and the objective's target tokens (for a
    distillation objective, the positions the teacher scored), in total and per step."""

    optimizer_steps: int = 0
    forward_tokens: int = 0
    target_tokens: int = 0
    targets_per_step: list[int] = field(default_factory=list)

    def add(self, forward_tokens: int, target_tokens: int) -> None:
        self.optimizer_steps += 1
        self.forward_tokens += forward_tokens
        self.target_tokens += target_tokens
        self.targets_per_step.append(target_tokens)

    def as_dict(self) -> dict:
        return {"optimizer_steps": self.optimizer_steps, "forward_tokens": self.forward_tokens,
                "target_tokens": self.target_tokens, "targets_per_step": list(self.targets_per_step)}

@dataclass
class TrainResult:
    model: torch.nn.Module
    history: list[dict[str, float]] = field(default_factory=list)
    steps: int = 0
    final_loss: float = float("nan")
    wall_s: float = 0.0
    resumed_from: int = 0
    budget: dict = field(default_factory=dict)


def use_bf16(precision: str, device: torch.device) -> bool:
    if precision == "bf16":
        return True
    return precision == "auto" and device.type == "cuda"


def make_engine(model: torch.nn.Module, cfg, env: DistEnv, device: torch.device) -> Engine:
    lr_fn = lr_multiplier(cfg.schedule, cfg.steps, cfg.warmup_steps, cfg.min_lr_ratio, cfg.decay_fraction)
    bf16 = use_bf16(cfg.precision, device)
    if cfg.backend == "deepspeed":
        from .deepspeed_backend import DeepSpeedEngine

        return DeepSpeedEngine(model, cfg, lr_fn, env, device, bf16)
    from .torch_backend import TorchEngine

    return TorchEngine(model, cfg, lr_fn, env, device, bf16)


def resume(engine, checkpoints: CheckpointDir, device: torch.device, env: DistEnv) -> tuple[dict, Path] | None:
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


def train(model: torch.nn.Module, objective: Objective, batches: BatchSource, cfg, *,
          checkpoint_root: str | Path, tracker: NullTracker | None = None, env: DistEnv | None = None,
          progress: bool = True) -> TrainResult:
    """Train ``model`` for ``cfg.steps`` optimizer steps (:class:`~relin.config.train.TrainConfig`).

    Resumes from the newest readable checkpoint under ``checkpoint_root`` (a run's keyed directory,
    :func:`~relin.train.checkpoint.run_directory`) when there is one. Returns the
    unwrapped model (on the training device) and the logged history (one row per ``log_every``).
    """
    env = env or dist_env()
    tracker = tracker if tracker is not None and env.is_main else NullTracker()
    if cfg.backend == "torch":
        init_process_group(env)
    device = device_for(env)
    if cfg.gradient_checkpointing:
        from .trainable import enable_gradient_checkpointing

        enable_gradient_checkpointing(model)
    model.to(device).train()
    if cfg.compile and device.type == "cuda":
        # in place: parameter names, checkpoints and the caller's model kept
        model.compile(mode=None if cfg.compile_mode == "default" else cfg.compile_mode)
    for frozen in objective.frozen_modules():
        frozen.to(device).eval().requires_grad_(False)
    engine = make_engine(model, cfg, env, device)
    checkpoints = CheckpointDir(checkpoint_root, env)

    start, history, wall_before, last_saved, budget = 0, [], 0.0, None, Budget()
    if (resumed := resume(engine, checkpoints, device, env)) is not None:
        state, last_saved = resumed
        start, history, wall_before = state["step"], state["history"], state["wall_s"]
        budget = Budget(**state["budget"])
        if state.get("source") is not None:
            batches.load_state_dict(state["source"])

    from ..logs import progress as progress_bar
    from ..logs import to_terminal

    bar = progress_bar(total=cfg.steps, initial=start, disable=not (progress and env.is_main), desc="train",
                       dynamic_ncols=True, mininterval=1.0)
    lines = progress and env.is_main and not to_terminal()  # a log file gets a line per logged step
    began = time.perf_counter()
    interval_tokens, interval_start, interval_sums, interval_counts = 0, time.perf_counter(), {}, {}
    skipped = int(history[-1].get("skipped_steps", 0)) if history else 0

    def diverged(what: str, step: int) -> TrainingDiverged:
        bar.close()
        kept = f"last good checkpoint kept at {last_saved}" if last_saved else "no checkpoint written yet"
        return TrainingDiverged(f"{what} at step {step}; {kept}")

    loss_value = history[-1]["loss"] if history else float("nan")
    adaptive = isinstance(batches, AdaptiveSource)
    # Rows of a length curriculum or length buckets change shape from step to step: compiled with symbolic batch and
    # sequence sizes from the first step, the model compiles once instead of again at each new shape.
    symbolic = cfg.compile and device.type == "cuda" and bool(cfg.curriculum or cfg.bucket_by_length)
    # Steps whose metrics and gradient norm are still on the device: (step, metric names, [metrics..., norm]).
    pending: list[tuple[int, list[str], torch.Tensor]] = []

    def settle() -> None:
        """Reads the pending steps' metrics in one copy to the host, the loop's only wait on the device: a step
        that neither logs, checkpoints nor adapts its source queues its kernels behind the last one's. A NaN loss
        raises at its own step; the update of a step with a non-finite gradient norm was already dropped."""
        nonlocal loss_value, skipped
        flat = torch.cat([values for *_, values in pending]).tolist()
        at = 0
        for step, names, _ in pending:
            row, at = flat[at:at + len(names) + 1], at + len(names) + 1
            metrics, norm = objective.finalize(dict(zip(names, row[:-1]))), row[-1]
            loss_value = metrics["loss"]
            if not math.isfinite(loss_value):
                raise diverged(f"loss became {loss_value}", step)
            if math.isfinite(norm):
                metrics["grad_norm"] = norm
            else:
                skipped += 1
                if skipped > cfg.skip_nonfinite_steps:
                    raise diverged(f"gradient norm became {norm} ({skipped - 1} non-finite steps skipped before; "
                                   f"train.skip_nonfinite_steps is {cfg.skip_nonfinite_steps})", step)
            if adaptive:
                metrics.update(batches.observe(step, metrics))
            for name, value in metrics.items():
                interval_sums[name] = interval_sums.get(name, 0.0) + value
                interval_counts[name] = interval_counts.get(name, 0) + 1
        pending.clear()

    for step in range(start + 1, cfg.steps + 1):
        micro = batches.micro_batches(step, cfg.grad_accum)
        if step == start + 1:
            objective.check_batch(micro[0])
        counted = sum(objective.count_targets(b) for b in micro)
        read = sum(int(b["attention_mask"].sum()) for b in micro)
        # Counted on the host: a single process never waits here for the previous step's kernels to finish
        # (the GPU would idle while this step's rows are collated and its forward launched).
        counts = torch.tensor([float(counted), float(read)])
        if env.distributed:
            counts = all_reduce_sum(counts.to(device)).cpu()
        targets, read = counts.unbind()
        budget.add(int(read), int(targets))
        interval_tokens += int(read)
        scale = env.world_size / targets.clamp(min=1.0)
        totals: dict[str, torch.Tensor] = {}
        for i, batch in enumerate(micro):
            batch = {k: _to_device(v, device, symbolic) for k, v in batch.items()}
            last = i == len(micro) - 1
            with engine.micro_step(last):
                out = objective(engine.model, batch)
                engine.backward(out.loss_sum * scale, last)
            for name, value in {"loss": out.loss_sum.detach(), **out.sums}.items():
                totals[name] = totals.get(name, 0.0) + value.float()
        names = sorted(totals)
        reduced = all_reduce_sum(torch.stack([totals[n] for n in names])) / targets.clamp(min=1.0)
        lr = engine.lr()
        norm = torch.as_tensor(engine.step(), dtype=torch.float32).to(reduced.device).reshape(1)
        pending.append((step, names, torch.cat([reduced, norm])))
        bar.update(1)
        logs = step % cfg.log_every == 0 or step == cfg.steps
        if adaptive or logs or step % cfg.checkpoint_every == 0:
            settle()
        if logs:
            now = time.perf_counter()
            means = {name: total / interval_counts[name] for name, total in interval_sums.items()}
            row = {"step": step, **means, "lr": lr, "tokens_per_s": interval_tokens / max(now - interval_start, 1e-9),
                   "max_len": batches.max_len(step), "elapsed_s": wall_before + now - began}
            if cfg.skip_nonfinite_steps:
                row["skipped_steps"] = skipped
            history.append(row)
            tracker.log_metrics({k: v for k, v in row.items() if k != "step"}, step)
            bar.set_postfix(loss=f"{means['loss']:.4f}", refresh=False)
            if lines:
                print(f"step {step}/{cfg.steps}  loss {means['loss']:.4f}  lr {lr:.2e}  "
                      f"{row['tokens_per_s']:.0f} tokens/s", file=sys.stderr, flush=True)
            interval_tokens, interval_start, interval_sums, interval_counts = 0, now, {}, {}
        if step % cfg.checkpoint_every == 0 or step == cfg.steps:
            staging = checkpoints.staging(step)
            engine.save(staging)
            last_saved = checkpoints.publish(step, staging, {
                "step": step, "history": history, "wall_s": wall_before + time.perf_counter() - began,
                "source": _source_state(batches), "budget": budget.as_dict()})
    bar.close()
    final_loss = history[-1]["loss"] if history else loss_value
    spent = budget.as_dict()
    if isinstance(batches, CostedSource):
        spent.update(batches.budget())
    return TrainResult(model=engine.module, history=history, steps=cfg.steps, final_loss=final_loss,
                       wall_s=wall_before + time.perf_counter() - began, resumed_from=start, budget=spent)
