"""Decode memory and throughput of a causal LM as the context grows (OPAL Fig. 4): the cache a prefill leaves
(attention keys/values; recurrent and conv states: exact), and the time of greedy decoding through it (this
machine; ``benchmarks/gpu/hybrid_decode_graphed.py`` measures static caches and CUDA graphs on the H200)."""
from __future__ import annotations

from ..config.opal import SpeedConfig


def cache_bytes(cache) -> tuple[int, int]:
    """``(kv, state)`` bytes of a hybrid's cache or a transformers attention cache."""
    if hasattr(cache, "nbytes"):
        held = cache.nbytes()
        return held["kv"], held["recurrent"]
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers), 0


def measure(model, context: int, cfg: SpeedConfig, vocab: int) -> dict:
    """Cache bytes after prefilling ``cfg.batch_size`` random prompts of ``context`` tokens, and the time of
    ``cfg.decode_steps`` greedy decode steps through that cache."""
    import time

    import torch

    from ..devices import model_device, synchronize
    from ..models.cache_api import cache_kwargs, output_cache

    device = model_device(model)
    g = torch.Generator().manual_seed(context)
    ids = torch.randint(4, vocab, (cfg.batch_size, context), generator=g).to(device)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        kv, state = cache_bytes(output_cache(out))
        synchronize(device)
        token, cache, began = out.logits[:, -1].argmax(-1), output_cache(out), time.perf_counter()
        for step in range(cfg.decode_steps):
            mask = torch.ones(cfg.batch_size, context + step + 1, dtype=torch.long, device=device)
            out = model(input_ids=token[:, None], attention_mask=mask, use_cache=True, **cache_kwargs(model, cache))
            token, cache = out.logits[:, -1].argmax(-1), output_cache(out)
        synchronize(device)
        seconds = time.perf_counter() - began
    return {"context": context, "kv_bytes": kv, "state_bytes": state, "cache_bytes": kv + state,
            "ms_per_step": round(1000 * seconds / cfg.decode_steps, 3),
            "tokens_per_s": round(cfg.batch_size * cfg.decode_steps / seconds, 1)}
