"""DeepSpeed ZeRO-2 backend: torch AdamW with its state sharded across ranks (``zero_pp_rank_*``).

Runs under ``deepspeed`` or ``torchrun`` (NCCL on GPU, gloo on CPU) and as a single process. The
first CPU run JIT-compiles DeepSpeed's shared-memory comm op (about 25 s, cached afterwards).
Checkpoints use DeepSpeed's own ``save_checkpoint``/``load_checkpoint`` (model, sharded optimizer,
scheduler); each rank's RNG state travels beside them.
"""
from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any, Callable

import torch

from ..errors import InputError, TrainingDiverged
from .checkpoint import rng_state, set_rng_state
from .distributed import DistEnv
from .torch_backend import adamw, schedule_lr

TAG = "zero2"


def zero2_config(cfg, world_size: int, bf16: bool) -> dict[str, Any]:
    """The DeepSpeed config of a :class:`~relin.config.train.TrainConfig`."""
    return {
        "train_micro_batch_size_per_gpu": cfg.batch_size,
        "gradient_accumulation_steps": cfg.grad_accum,
        "train_batch_size": cfg.batch_size * cfg.grad_accum * world_size,
        "gradient_clipping": cfg.clip_grad_norm,
        "zero_optimization": {"stage": 2, "contiguous_gradients": True, "overlap_comm": False},
        "zero_allow_untested_optimizer": True,
        "zero_force_ds_cpu_optimizer": False,
        "bf16": {"enabled": bf16},
        "steps_per_print": 1 << 30,
        "wall_clock_breakdown": False,
    }


class DeepSpeedEngine:
    """Same interface as :class:`~relin.train.torch_backend.TorchEngine`."""

    def __init__(self, model: torch.nn.Module, cfg, lr_fn: Callable[[int], float], env: DistEnv,
                 device: torch.device, bf16: bool):
        import deepspeed
        from deepspeed.utils import logger as ds_logger

        ds_logger.setLevel("WARNING")
        if device.type != "cuda":
            # CPU ranks reduce through gloo: DeepSpeed's shared-memory all-reduce would otherwise be compiled from
            # C++ on first use (about a minute of two cores on every fresh install) for no gain at this scale.
            deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
        deepspeed.init_distributed(dist_backend="nccl" if device.type == "cuda" else "gloo")
        self.env, self.device = env, device
        self.engine, self.optimizer, _, self.scheduler = deepspeed.initialize(
            model=model, optimizer=adamw(model, cfg),
            lr_scheduler=lambda opt: torch.optim.lr_scheduler.LambdaLR(opt, lr_fn),
            config=zero2_config(cfg, env.world_size, bf16))
        self.model, self.module = self.engine, self.engine.module

    def micro_step(self, last: bool):
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor, last: bool) -> None:
        # The loop already divides by the step's targets, so no extra 1/grad_accum here.
        self.engine.backward(loss, scale_wrt_gas=False)
        if not last:
            self.engine.step()

    def step(self) -> float:
        """Clip, update, advance the schedule; returns the pre-clip gradient norm. A non-finite norm raises
        :class:`TrainingDiverged` as the torch engine does (ZeRO reduces the gradients inside ``step``, so the
        norm is known only after it; the loop then stops without checkpointing this step)."""
        self.engine.step()
        norm = self.engine.get_global_grad_norm()
        norm = float(norm) if norm is not None else float("nan")
        if not math.isfinite(norm):
            raise TrainingDiverged(f"gradient norm became {norm}")
        return norm

    def lr(self) -> float:
        return schedule_lr(self.optimizer)

    def save(self, directory: Path) -> None:
        self.engine.save_checkpoint(str(directory), tag=TAG, save_latest=False)
        torch.save(rng_state(), directory / TAG / f"rng_rank{self.env.rank}.pt")

    def load(self, directory: Path) -> None:
        path, _ = self.engine.load_checkpoint(str(directory), tag=TAG)
        if path is None:
            raise InputError(f"checkpoint {directory}: no DeepSpeed checkpoint tagged {TAG!r} (written by "
                             f"another backend?); delete it to train from scratch")
        rng = directory / TAG / f"rng_rank{self.env.rank}.pt"
        if rng.is_file():
            set_rng_state(torch.load(rng, weights_only=True))
