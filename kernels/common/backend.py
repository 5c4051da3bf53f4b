"""Which implementation a public op runs: the Triton kernels or the chunked PyTorch path.

``RELIN_KERNEL_BACKEND`` = ``auto`` (default: Triton on CUDA tensors, PyTorch chunked on CPU),
``triton`` (Triton always; on CPU this needs ``TRITON_INTERPRET=1``) or ``torch``.
"""
from __future__ import annotations

import contextlib
import os

import torch

BACKENDS = ("auto", "triton", "torch")
_override: str | None = None


def interpreting() -> bool:
    """True when Triton runs kernels through its CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def requested_backend() -> str:
    name = _override or os.environ.get("RELIN_KERNEL_BACKEND", "auto")
    if name not in BACKENDS:
        raise ValueError(f"RELIN_KERNEL_BACKEND={name!r}: expected one of {', '.join(BACKENDS)}")
    return name


def use_triton(x: torch.Tensor) -> bool:
    """Decide for one call, from the request and the device of its first input."""
    name = requested_backend()
    if name == "torch":
        return False
    if name == "triton":
        if not x.is_cuda and not interpreting():
            raise RuntimeError("RELIN_KERNEL_BACKEND=triton on a CPU tensor needs TRITON_INTERPRET=1")
        return True
    return x.is_cuda


@contextlib.contextmanager
def backend(name: str):
    """Force a backend inside a ``with`` block (tests, benchmarks)."""
    global _override
    if name not in BACKENDS:
        raise ValueError(f"backend {name!r}: expected one of {', '.join(BACKENDS)}")
    previous, _override = _override, name
    try:
        yield
    finally:
        _override = previous
