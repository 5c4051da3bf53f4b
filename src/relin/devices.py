"""Where a single-process stage computes: the GPU when there is one (the Triton kernels run there), else the
CPU. Training stages get theirs from :func:`relin.train.distributed.device_for` (one GPU per rank)."""
from __future__ import annotations

import torch


def compute_device() -> torch.device:
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def model_device(model) -> torch.device:
    """Where the model's parameters live (CPU for a parameter-free model)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU's as ``platform`` reports it."""
    import platform

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so that a host timer measures it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
