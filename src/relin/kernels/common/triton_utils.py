"""Keeping Triton kernels runnable under the CPU interpreter, and tile widths that Hopper serves.

Rules (see notes/kernels.md): bypass autotuning when interpreting (the autotuner benchmarks through a GPU
driver), cast loop variables with ``tl.cast`` rather than ``.to()``.
"""
from __future__ import annotations

import functools
import types

import torch
import triton

from .backend import interpreting

# Narrowest tile along a feature dim (K or V), which is the N of the products that read it. At 8 warps a product's N
# is split over two warpgroups, and at 16 or fewer columns each Triton 3.6 read shared memory out of bounds on the
# H200 (compute-sanitizer: the gated delta rule's gradient kernels at K = 16 and K = 24, its intra_dv at V = 24, the
# decayed linear attention output kernel at V = 32). Smaller head dims are served by masked 64-wide tiles.
MIN_TILE = 64


def autotune(configs, key, **kwargs):
    """``triton.autotune`` on a GPU; the first config alone under the interpreter.

    On a GPU the chosen configs are cached on disk (Triton's cache, keyed by kernel source, key values and
    device): every DAG stage is its own process, and without the cache each one benchmarks every config of
    every kernel again before its first step. Repeat launches look their config up through ``_cached_run``.
    """
    if interpreting():
        return triton.autotune(configs=configs[:1], key=key, **kwargs)
    kwargs.setdefault("cache_results", True)

    def decorator(fn):
        tuner = triton.autotune(configs=configs, key=key, **kwargs)(fn)
        tuner.run = types.MethodType(_cached_run, tuner)
        tuner.chosen = {}
        return tuner
    return decorator


def _cached_run(tuner, *args, **kwargs):
    """``Autotuner.run`` with its choice remembered per (key values, tensor dtypes) for the next launch.

    Triton's own lookup rebuilds a dict of every argument and scans it on each launch, which costs tens of
    microseconds per kernel: comparable to a whole chunk kernel at short lengths. Our launches pass every key
    they tune on as a keyword; a launch that passes one positionally takes Triton's path.
    """
    try:
        key = (tuple(kwargs[name] for name in tuner.keys),
               tuple(arg.dtype for arg in args if isinstance(arg, torch.Tensor)))
    except KeyError:
        return type(tuner).run(tuner, *args, **kwargs)
    options = tuner.chosen.get(key)
    if options is None:
        result = type(tuner).run(tuner, *args, **kwargs)
        if tuner.best_config.pre_hook is None:
            tuner.chosen[key] = tuner.best_config.all_kwargs()
        return result
    return tuner.fn.run(*args, **kwargs, **options)


def tile(dim: int, cap: int) -> int:
    """Tile width along a feature dim of size ``dim``: a power of two in [MIN_TILE, max(cap, MIN_TILE)]."""
    return max(MIN_TILE, min(cap, triton.next_power_of_2(dim)))


def tensor_descriptors(device: torch.device) -> bool:
    """Whether kernels on ``device`` read through TMA tensor descriptors (``tl.make_tensor_descriptor``): on Hopper
    and newer GPUs, not under the interpreter. Descriptors made inside a kernel need scratch memory, which Triton
    takes from the allocator set here (the caching allocator, so CUDA-graph capture keeps working). Triton keeps
    the allocator in a context variable, which a thread does not inherit: the autograd engine's threads (a
    recomputed forward under gradient checkpointing) would launch without one, so it is set on every call."""
    if device.type != "cuda" or interpreting() or not _hopper(device):
        return False
    triton.set_allocator(_scratch)
    return True


@functools.lru_cache(maxsize=None)
def _hopper(device: torch.device) -> bool:
    """Once per device, off the launch path: whether its compute capability has TMA."""
    return torch.cuda.get_device_capability(device)[0] >= 9


def _scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device="cuda")
