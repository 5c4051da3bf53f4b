"""The cache argument and output of a causal LM across transformers versions: 5.17 names it
``past_key_values`` (the GPU machine's image), later 5.x releases ``cache``; the hybrid model takes ``cache``."""
from __future__ import annotations

import functools
import inspect


@functools.lru_cache(maxsize=None)
def _cache_argument(forward_owner: type) -> str:
    parameters = inspect.signature(forward_owner.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def cache_kwargs(model, cache) -> dict:
    """``{name: cache}`` under the name ``model.forward`` takes."""
    return {_cache_argument(type(model)): cache}


def output_cache(out):
    """The cache a forward returned (``out.cache`` or ``out.past_key_values``)."""
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)
