"""Process-group plumbing for multi-process training (``torchrun`` / ``deepspeed`` launchers).

Rank and world size come from the launcher's environment; without a launcher the run is a single
process and every helper here is a no-op.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


@dataclass(frozen=True)
class DistEnv:
    rank: int
    world_size: int
    local_rank: int

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def dist_env() -> DistEnv:
    return DistEnv(rank=int(os.environ.get("RANK", 0)), world_size=int(os.environ.get("WORLD_SIZE", 1)),
                   local_rank=int(os.environ.get("LOCAL_RANK", 0)))


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
