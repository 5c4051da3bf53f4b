"""Which process this is: rank and world size from the launcher's environment (``torchrun``,
``deepspeed``), without importing torch, so tracking and I/O can ask too."""
from __future__ import annotations

import os
from dataclasses import dataclass


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
