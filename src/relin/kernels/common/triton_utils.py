"""Keeping Triton kernels runnable under the CPU interpreter, tile widths that Hopper serves, and the [K, V]
state tiles of the recurrent and chunked state passes.

Rules (see notes/kernels.md): bypass autotuning when interpreting (the autotuner benchmarks through a GPU
driver), cast loop variables with ``tl.cast`` rather than ``.to()``.
"""
from __future__ import annotations

import functools
import types

import torch
import triton
import triton.language as tl

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


@triton.jit
def state_tile(i_k, i_v, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr):
    """Device side: the (i_k, i_v) block of a row-major [K, V] state: (K offsets, V offsets, their masks, the
    block's mask, its element offsets)."""
    o_k = i_k * BK + tl.arange(0, BK)
    o_v = i_v * BV + tl.arange(0, BV)
    m_k, m_v = o_k < K, o_v < V
    return o_k, o_v, m_k, m_v, m_k[:, None] & m_v[None, :], o_k[:, None] * V + o_v[None, :]


@triton.jit
def load_state(s0, i_nh, o_kv, m_kv, K: tl.constexpr, V: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
               LOAD: tl.constexpr):
    """Device side: a [BK, BV] fp32 state block, zeros plus (when LOAD) block ``o_kv`` of state ``i_nh`` of
    ``s0 [N * H, K, V]``."""
    b_s = tl.zeros([BK, BV], dtype=tl.float32)
    if LOAD:
        b_s += tl.load(s0 + i_nh * K * V + o_kv, mask=m_kv, other=0.).to(tl.float32)
    return b_s


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
