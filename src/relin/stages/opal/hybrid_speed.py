"""``relin opal-hybrid-speed``: decode memory and throughput of a hybrid against its teacher as the context
grows (OPAL Fig. 4). For each context length: prefill a batch of random prompts, then time greedy
decoding one token at a time through each model's cache. Memory is what the cache holds after the
prefill (attention keys/values; recurrent and conv states), so it is exact; throughput measures this
machine (on a GPU: ``benchmarks/gpu/hybrid_decode_graphed.py`` with static caches and CUDA graphs).

Writes ``speed.json`` and ``speed.csv`` (rows of model, context and cache bytes): what the models determine,
so a rerun gives the same files. The timings (ms per decode step, tokens/s) go to the stage's MLflow run.
"""
from __future__ import annotations

import argparse

from ...artifacts import DECODE_TIMING_KEYS, SPEED_COLUMNS
from ...config.opal import SpeedConfig


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"opal.speed": SpeedConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--teacher", required=True, help="teacher model directory")
    parser.add_argument("--hybrid", required=True, help="hybrid model directory")
    parser.add_argument("--out", required=True, help="speed.json to write")
    parser.add_argument("--table", required=True, help="speed.csv to write")


def run(args: argparse.Namespace, sections) -> None:
    import torch

    from ...devices import compute_device, device_name
    from ...eval.decode_speed import measure
    from ...io import atomic_write_csv, atomic_write_json
    from ...models.saved import load_saved
    from ...tracking import stage_run

    cfg = sections.get("opal.speed")
    # On the GPU, bf16 weights as a served model holds them (fp32 on the CPU).
    device = compute_device()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    with stage_run("opal-hybrid-speed", sections.raw, inputs=[args.teacher, args.hybrid],
                   outputs=[args.out, args.table]) as tracker:
        rows = []
        for name, path in (("teacher", args.teacher), ("hybrid", args.hybrid)):
            model = load_saved(path).eval().to(device, dtype)
            too_long = [c for c in cfg.contexts if c + cfg.decode_steps > model.config.max_position_embeddings]
            if too_long:
                from ...errors import ConfigError

                raise ConfigError(f"opal.speed.contexts: {too_long} + decode_steps exceed {path}'s "
                                  f"max_position_embeddings={model.config.max_position_embeddings}")
            for context in cfg.contexts:
                measured = measure(model, context, cfg, model.config.vocab_size)
                rows.append({"model": name, **{k: v for k, v in measured.items() if k not in DECODE_TIMING_KEYS}})
                tracker.log_metrics({**{f"{name}/{k}": measured[k] for k in DECODE_TIMING_KEYS},
                                     f"{name}/cache_mib": measured["cache_bytes"] / 2**20}, step=context)
        tracker.set_tags({"relin.device": device_name(device), "relin.threads": str(torch.get_num_threads())})
        atomic_write_csv(args.table, rows, list(SPEED_COLUMNS))
        atomic_write_json(args.out, {"dtype": str(dtype).removeprefix("torch."), "batch_size": cfg.batch_size,
                                     "decode_steps": cfg.decode_steps, "rows": rows})
