"""One optimizer step: ``grad_accum`` micro-batches' forwards and backwards, scaled so that accumulation and data
parallelism equal one big batch, then the backend's clip, update and schedule."""
from __future__ import annotations

import torch

from ..config.train import TrainConfig
from .distributed import DistEnv, all_reduce_max, all_reduce_sum
from .engine import Engine
from .objectives import Objective


def symbolic_shapes(cfg: TrainConfig, device: torch.device) -> bool:
    """Whether batches get symbolic batch and sequence sizes for ``torch.compile``. Rows of a length curriculum or
    length buckets change shape from step to step: compiled with symbolic sizes from the first step, the model
    compiles once instead of again at each new shape."""
    return cfg.compile and device.type == "cuda" and bool(cfg.curriculum or cfg.bucket_by_length)


def to_device(tensor: torch.Tensor, device: torch.device, symbolic: bool) -> torch.Tensor:
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


def count_tokens(objective: Objective, micro: list[dict[str, torch.Tensor]], env: DistEnv,
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The step's target tokens and the tokens its forwards read, summed over all ranks (two CPU scalars).
    Counted on the host: a single process never waits here for the previous step's kernels to finish (the GPU
    would idle while this step's rows are collated and its forward launched)."""
    counted = sum(objective.count_targets(b) for b in micro)
    read = sum(int(b["attention_mask"].sum()) for b in micro)
    counts = torch.tensor([float(counted), float(read)])
    if env.distributed:
        counts = all_reduce_sum(counts.to(device)).cpu()
    targets, read = counts.unbind()
    return targets, read


def optimizer_step(engine: Engine, objective: Objective, micro: list[dict[str, torch.Tensor]], targets: torch.Tensor,
                   env: DistEnv, device: torch.device, symbolic: bool) -> tuple[list[str], torch.Tensor, float]:
    """Train on ``micro``, each micro-batch's summed loss scaled by the step's ``targets`` over all ranks.

    Returns the metric names (the sums' sorted, then the maxima's sorted), their step values over all ranks (sums
    as means per target, maxima as maxima) followed by the pre-clip gradient norm (one tensor, left on the
    device), and the lr the update used.
    """
    scale = env.world_size / targets.clamp(min=1.0)
    totals: dict[str, torch.Tensor] = {}
    peaks: dict[str, torch.Tensor] = {}
    for i, batch in enumerate(micro):
        batch = {k: to_device(v, device, symbolic) for k, v in batch.items()}
        last = i == len(micro) - 1
        with engine.micro_step(last):
            out = objective(engine.model, batch)
            engine.backward(out.loss_sum * scale, last)
        for name, value in {"loss": out.loss_sum.detach(), **out.sums}.items():
            totals[name] = totals.get(name, 0.0) + value.float()
        for name, value in out.maxima.items():
            peaks[name] = torch.maximum(peaks[name], value.float()) if name in peaks else value.float()
    names, peak_names = sorted(totals), sorted(peaks)
    reduced = all_reduce_sum(torch.stack([totals[n] for n in names])) / targets.clamp(min=1.0)
    if peak_names:
        reduced = torch.cat([reduced, all_reduce_max(torch.stack([peaks[n] for n in peak_names]))])
    lr = engine.lr()
    norm = torch.as_tensor(engine.step(), dtype=torch.float32).to(reduced.device).reshape(1)
    return names + peak_names, torch.cat([reduced, norm]), lr
