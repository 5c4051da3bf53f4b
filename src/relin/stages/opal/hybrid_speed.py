"""``relin hybrid-speed``: decode memory and throughput of a hybrid against its teacher as the context
grows (OPAL Fig. 4). For each context length: prefill a batch of random prompts, then time greedy
decoding one token at a time through each model's cache. Memory is what the cache holds after the
prefill (attention keys/values; recurrent and conv states), so it is exact; throughput measures this
machine (on a GPU: ``benchmarks/gpu/hybrid_decode.py`` with static caches and CUDA graphs).

Writes ``speed.json`` (rows of model, context, cache bytes, ms per decode step, tokens/s, and the
device) and ``speed.csv``; unlike other outputs they change from run to run with the machine.
"""
from __future__ import annotations

import argparse

from ...artifacts import SPEED_COLUMNS
from ...config.opal import SpeedConfig


def SECTIONS(args: argparse.Namespace) -> dict[str, type]:
    return {"opal.speed": SpeedConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--teacher", required=True, help="teacher model directory")
    parser.add_argument("--hybrid", required=True, help="hybrid model directory")
    parser.add_argument("--out", required=True, help="speed.json to write")
    parser.add_argument("--table", required=True, help="speed.csv to write")


def cache_bytes(cache) -> tuple[int, int]:
    """``(kv, state)`` bytes of a hybrid's cache or a transformers attention cache."""
    if hasattr(cache, "nbytes"):
        held = cache.nbytes()
        return held["kv"], held["recurrent"]
    return sum(layer.keys.nbytes + layer.values.nbytes for layer in cache.layers), 0


def measure(model, context: int, cfg: SpeedConfig, vocab: int) -> dict:
    import time

    import torch

    from ...devices import model_device, synchronize
    from ...models.cache_api import cache_kwargs, output_cache

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


def run(args: argparse.Namespace, sections) -> None:
    import torch

    from ...devices import compute_device, device_name
    from ...io import atomic_write_csv, atomic_write_json
    from ...models.teachers import load_pretrained
    from ...tracking import stage_run
    from .._training import use_thread_budget

    cfg = sections.get("opal.speed")
    use_thread_budget()
    # On the GPU, bf16 weights as a served model holds them (fp32 on the CPU).
    device = compute_device()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with stage_run("hybrid-speed", sections.raw, inputs=[args.teacher, args.hybrid],
                   outputs=[args.out, args.table]) as tracker:
        rows = []
        for name, path in (("teacher", args.teacher), ("hybrid", args.hybrid)):
            model = load_pretrained(path).eval().to(device, dtype)
            too_long = [c for c in cfg.contexts if c + cfg.decode_steps > model.config.max_position_embeddings]
            if too_long:
                from ...errors import ConfigError

                raise ConfigError(f"opal.speed.contexts: {too_long} + decode_steps exceed {path}'s "
                                  f"max_position_embeddings={model.config.max_position_embeddings}")
            for context in cfg.contexts:
                rows.append({"model": name, **measure(model, context, cfg, model.config.vocab_size)})
                tracker.log_metrics({f"{name}/tokens_per_s": rows[-1]["tokens_per_s"],
                                     f"{name}/cache_mib": rows[-1]["cache_bytes"] / 2**20}, step=context)
        atomic_write_csv(args.table, rows, list(SPEED_COLUMNS))
        atomic_write_json(args.out, {"device": device_name(device), "dtype": str(dtype).removeprefix("torch."),
                                     "threads": torch.get_num_threads(), "batch_size": cfg.batch_size,
                                     "decode_steps": cfg.decode_steps, "rows": rows})
