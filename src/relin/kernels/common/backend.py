"""Which implementation a public op runs: the Triton kernels or the chunked PyTorch path.

Every public op takes ``backend``: ``"auto"`` (Triton on CUDA tensors, PyTorch on CPU tensors), ``"triton"``
(Triton always; on CPU tensors this needs ``TRITON_INTERPRET=1``) or ``"torch"``. ``None`` (the default)
takes the environment variable ``RELIN_KERNEL_BACKEND``, itself ``auto`` when unset.
"""
from __future__ import annotations

import os

import torch

BACKENDS = ("auto", "triton", "torch")


def interpreting() -> bool:
    """True when Triton runs kernels through its CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def use_triton(x: torch.Tensor, backend: str | None) -> bool:
    """Whether one call runs the Triton kernels, from ``backend`` and the device of its first input."""
    name = backend if backend is not None else os.environ.get("RELIN_KERNEL_BACKEND", "auto")
    if name not in BACKENDS:
        source = "backend" if backend is not None else "RELIN_KERNEL_BACKEND"
        raise ValueError(f"{source}={name!r}: expected one of {', '.join(BACKENDS)}")
    if name == "torch":
        return False
    if name == "triton":
        if not x.is_cuda and not interpreting():
            raise ValueError("backend='triton' on CPU tensors needs TRITON_INTERPRET=1")
        return True
    return x.is_cuda
