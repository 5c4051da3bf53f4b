"""Process-group plumbing for multi-process training (``torchrun`` / ``deepspeed`` launchers).

Rank and world size come from the launcher's environment; without a launcher the run is a single
process and every helper here is a no-op.
"""
from __future__ import annotations

import torch
import torch.distributed as dist

from ..ranks import DistEnv, dist_env  # noqa: F401  (re-exported: the training code's one import)


def device_for(env: DistEnv) -> torch.device:
    if torch.cuda.is_available():
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def init_process_group(env: DistEnv) -> None:
    """NCCL on GPU, gloo on CPU; only when launched with more than one process."""
    if env.distributed and not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def barrier() -> None:
    if dist.is_initialized():
        dist.barrier()


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def all_reduce_max(tensor: torch.Tensor) -> torch.Tensor:
    if dist.is_initialized():
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
    return tensor
