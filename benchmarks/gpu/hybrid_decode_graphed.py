"""Decode memory and step time of an OPAL hybrid against its Qwen3 teacher with launch overhead removed:
both on a static cache with a CUDA-graphed greedy decode step (issue 14's "must show").

The models are :mod:`hybrid_decode`'s: a Qwen3 of a named size from its config with random bf16 weights, and
its OPAL conversion (every 4th layer attention, the rest Gated DeltaNet on relin's Triton kernels). Each
model decodes through a preallocated cache of ``context + margin`` slots:

- teacher: transformers' ``StaticCache``, step ``model(token, cache_position=position, past_key_values=cache)``;
- hybrid: ``relin.models.hybrid.StaticHybridCache``, step ``model(token, cache=cache)``.

The step (forward, argmax written back into the token buffer, position advanced) is captured once in a
``torch.cuda.CUDAGraph`` (manual capture; for the teacher ``torch.compile(mode="reduce-overhead")`` is the
fallback if capture fails, and the JSON says which ran) and replayed. Per (model, context) it records the
cache bytes (KV at ``context + margin`` slots; recurrent and conv states), peak allocated memory above the
resident weights, ms per eager step and per graphed step (CUDA events, after warmup), tokens/s, and the
hybrid/teacher ratios. The prefill runs eager in chunks through the same static cache, untimed.

Before timing, a consistency check at ``--check-context`` per model: the logits of one decode step through
the dynamic cache, through the static cache eagerly, and through the graph replayed from the same state
(state snapshot and restore), max abs differences printed and saved. On a CPU (``--size tiny``) the graph
is skipped and the static step is timed eagerly: a dry run of the script.

    python benchmarks/gpu/hybrid_decode_graphed.py --size 1.7b --batch 16 --contexts 8192 32768 --out $OUT
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hybrid_decode import DEVICE, SIZES, hybrid_of, qwen3, sync  # noqa: E402

GRAPHS = DEVICE == "cuda"
# The targets at the longest context: hybrid cache ≤ 30% of the teacher's, step ≥ 2× faster.
MAX_CACHE_RATIO, MIN_SPEEDUP = 0.30, 2.0


def is_hybrid(model) -> bool:
    return getattr(model.config, "model_type", "") == "relin_hybrid"


class Decoder:
    """One model's static cache, its token/position buffers and its greedy decode step, eager or
    captured in a CUDA graph. ``batch`` rows of up to ``max_length`` tokens."""

    def __init__(self, model, batch: int, max_length: int):
        self.model, self.hybrid, self.max_length = model, is_hybrid(model), max_length
        if self.hybrid:
            from relin.models.hybrid import StaticHybridCache

            self.cache = StaticHybridCache.allocate(model, batch, max_length)
        else:
            from transformers import StaticCache

            self.cache = StaticCache(config=model.config, max_cache_len=max_length)
        self.position = torch.zeros((), dtype=torch.long, device=DEVICE)    # the teacher's next cache_position
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=DEVICE)  # the step's input [B, 1]
        self.graph, self.graph_logits, self.compiled, self.mode = None, None, None, "eager"

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids [B, T]`` through the cache; returns the last logits ``[B, vocab]``."""
        if self.hybrid:
            return self.model(input_ids=ids, cache=self.cache, use_cache=True, logits_to_keep=1).logits[:, -1]
        positions = self.position + torch.arange(ids.shape[1], device=ids.device)
        logits = self.model(input_ids=ids, cache_position=positions, past_key_values=self.cache, use_cache=True,
                            logits_to_keep=1).logits[:, -1]
        self.position.add_(ids.shape[1])
        return logits

    def prefill(self, ids: torch.Tensor, chunk: int) -> None:
        for start in range(0, ids.shape[1], chunk):
            logits = self.forward(ids[:, start:start + chunk])
        self.token.copy_(logits.argmax(-1)[:, None])

    def step(self) -> torch.Tensor:
        """One greedy step from ``self.token``, written back into it; returns the step's logits."""
        logits = self.forward(self.token)
        self.token.copy_(logits.argmax(-1)[:, None])
        return logits

    def capture(self, warmup: int = 3) -> None:
        """Capture :meth:`step` (warmup steps first, on a side stream, as CUDA graphs require); they
        advance the cache by ``warmup`` tokens. The teacher falls back to torch.compile if capture fails."""
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.graph_logits = self.step()
            self.graph, self.mode = graph, "cuda_graph"
        except Exception as error:  # noqa: BLE001 - any capture failure falls back, and is recorded
            if self.hybrid:
                raise
            print(f"teacher capture failed ({type(error).__name__}: {error}); torch.compile reduce-overhead",
                  flush=True)
            self.compiled, self.mode = torch.compile(self.step, mode="reduce-overhead"), "compile_reduce_overhead"
            for _ in range(warmup):
                self.compiled()

    def replay(self) -> torch.Tensor:
        if self.graph is not None:
            self.graph.replay()
            return self.graph_logits
        return self.compiled() if self.compiled is not None else self.step()

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor a step reads or writes (cache, length, position, token), for snapshot/restore."""
        found = [self.position, self.token]
        if self.hybrid:
            found += [self.cache.length] + [t for s in self.cache.states for t in vars(s).values()
                                            if isinstance(t, torch.Tensor) and t is not self.cache.length]
        else:
            for layer in self.cache.layers:  # the length counter exists in newer transformers only
                found += [t for t in (layer.keys, layer.values, getattr(layer, "cumulative_length", None))
                          if isinstance(t, torch.Tensor)]
        return found

    def nbytes(self) -> tuple[int, int]:
        """(KV bytes, recurrent + conv state bytes) held by the cache."""
        if self.hybrid:
            held = self.cache.nbytes()
            return held["kv"], held["recurrent"]
        return sum(layer.keys.nbytes + layer.values.nbytes for layer in self.cache.layers), 0


def random_ids(batch: int, context: int, vocab: int) -> torch.Tensor:
    g = torch.Generator(device=DEVICE).manual_seed(context)
    return torch.randint(4, vocab, (batch, context), generator=g, device=DEVICE)


@torch.no_grad()
def consistency(model, batch: int, context: int, vocab: int) -> dict:
    """Max abs logit differences of one decode step: static eager vs dynamic cache, graph vs static eager."""
    ids = random_ids(batch, context, vocab)
    if is_hybrid(model):
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        token = out.logits[:, -1].argmax(-1)[:, None]
        dynamic = model(input_ids=token, cache=out.cache, use_cache=True, logits_to_keep=1).logits[:, -1]
    else:
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        token = out.logits[:, -1].argmax(-1)[:, None]
        dynamic = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True,
                        logits_to_keep=1).logits[:, -1]
    decoder = Decoder(model, batch, context + 8)
    decoder.prefill(ids, context)
    # Random weights give near-flat logits, so bf16 rounding may pick another argmax: step both from one token.
    same_prefill_token = (decoder.token == token).float().mean().item()
    decoder.token.copy_(token)
    saved = [t.clone() for t in decoder.tensors()]
    eager = decoder.step().clone()
    row = {"context": context, "static_vs_dynamic_max_abs": (eager - dynamic).abs().max().item(),
           "logit_scale_max_abs": dynamic.abs().max().item(), "prefill_argmax_equal": same_prefill_token}
    if GRAPHS:
        decoder.capture()
        for mine, kept in zip(decoder.tensors(), saved):
            mine.copy_(kept)
        graphed = decoder.replay().clone()
        row.update(graph_mode=decoder.mode, graph_vs_eager_max_abs=(graphed - eager).abs().max().item(),
                   graph_vs_eager_argmax_equal=(graphed.argmax(-1) == eager.argmax(-1)).float().mean().item())
    return row


@torch.no_grad()
def measure(model, context: int, batch: int, decode_steps: int, eager_steps: int, chunk: int, vocab: int) -> dict:
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    resident = torch.cuda.memory_allocated() if DEVICE == "cuda" else 0
    ids = random_ids(batch, context, vocab)
    # Slots rounded up to a multiple of 64: SDPA's memory-efficient kernel copies a mask whose last dim is unaligned.
    decoder = Decoder(model, batch, -(-(context + decode_steps + eager_steps + 32) // 64) * 64)
    sync()
    began = time.perf_counter()
    decoder.prefill(ids, chunk)
    sync()
    prefill_s = time.perf_counter() - began
    del ids
    kv, state = decoder.nbytes()

    def timed(fn, steps: int) -> float:
        """ms per call of ``fn`` over ``steps`` calls, after 2 untimed ones."""
        for _ in range(2):
            fn()
        if DEVICE != "cuda":
            began = time.perf_counter()
            for _ in range(steps):
                fn()
            return 1000 * (time.perf_counter() - began) / steps
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(steps):
            fn()
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / steps

    eager_ms = timed(decoder.step, eager_steps)
    if GRAPHS:
        decoder.capture()
    graphed_ms = timed(decoder.replay, decode_steps)
    row = {"context": context, "batch": batch, "max_length": decoder.max_length, "kv_bytes": kv, "state_bytes": state,
           "cache_gib": (kv + state) / 2**30,
           "peak_above_weights_gib": (torch.cuda.max_memory_allocated() - resident) / 2**30 if DEVICE == "cuda"
           else float("nan"),
           "prefill_s": round(prefill_s, 3), "eager_ms_per_step": round(eager_ms, 3), "graph_mode": decoder.mode,
           "ms_per_step": round(graphed_ms, 3), "tokens_per_s": round(1000 * batch / graphed_ms, 1)}
    del decoder
    return row


def ratios(rows: list[dict]) -> list[dict]:
    """hybrid/teacher cache and step-time ratios per context, and the issue's verdicts."""
    by = {(r["model"], r["context"]): r for r in rows if "error" not in r}
    out = []
    for context in sorted({c for _, c in by}):
        h, t = by.get(("hybrid", context)), by.get(("teacher", context))
        if h and t:
            cache = h["cache_gib"] / t["cache_gib"]
            speedup = t["ms_per_step"] / h["ms_per_step"]
            out.append({"context": context, "cache_ratio": round(cache, 4), "speedup": round(speedup, 3),
                        "eager_speedup": round(t["eager_ms_per_step"] / h["eager_ms_per_step"], 3),
                        "cache_ok": cache <= MAX_CACHE_RATIO, "speed_ok": speedup >= MIN_SPEEDUP})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="1.7b")
    parser.add_argument("--contexts", type=int, nargs="+", default=[8192, 32768])
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--decode-steps", type=int, default=64, help="timed graph replays per (model, context)")
    parser.add_argument("--eager-steps", type=int, default=8, help="timed eager static-cache steps")
    parser.add_argument("--prefill-chunk", type=int, default=4096)
    parser.add_argument("--check-context", type=int, default=512)
    parser.add_argument("--out", default="benchmarks/results")
    args = parser.parse_args()

    import transformers
    import triton

    teacher = qwen3(args.size, max(args.contexts) + args.decode_steps + args.eager_steps + 64)
    hybrid = hybrid_of(teacher)
    vocab = teacher.config.vocab_size
    meta = {"gpu": torch.cuda.get_device_name() if DEVICE == "cuda" else "cpu", "torch": torch.__version__,
            "triton": triton.__version__, "transformers": transformers.__version__,
            "git_commit": os.environ.get("RELIN_GIT_COMMIT", "unknown"),
            "date_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"), "size": args.size,
            "dtype": str(next(teacher.parameters()).dtype), "mixer_types": hybrid.config.mixer_types,
            "decode_steps": args.decode_steps, "eager_steps": args.eager_steps, "prefill_chunk": args.prefill_chunk,
            "targets": {"max_cache_ratio": MAX_CACHE_RATIO, "min_speedup": MIN_SPEEDUP}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    checks, rows = [], []

    def save() -> None:  # after every row, so that a run stopped early keeps what it measured
        (out / "hybrid_decode_graphed.json").write_text(
            json.dumps({**meta, "checks": checks, "rows": rows, "ratios": ratios(rows)}, indent=1))

    for name, model in (("hybrid", hybrid), ("teacher", teacher)):
        checks.append({"model": name, **consistency(model, args.batch, args.check_context, vocab)})
        print(json.dumps(checks[-1]), flush=True)
        save()
    for name, model in (("hybrid", hybrid), ("teacher", teacher)):
        for context in args.contexts:
            try:
                row = measure(model, context, args.batch, args.decode_steps, args.eager_steps, args.prefill_chunk,
                              vocab)
            except torch.OutOfMemoryError:
                row = {"context": context, "batch": args.batch, "error": "out of memory"}
            rows.append({"model": name, **row})
            print(json.dumps(rows[-1]), flush=True)
            save()
    compared = ratios(rows)

    print(f"\nQwen3-{args.size} shape, batch {args.batch}, {meta['gpu']}, static cache, graphed step")
    for c in checks:
        print(f"check {c['model']:8} T={c['context']}: static vs dynamic {c['static_vs_dynamic_max_abs']:.3g}, "
              f"graph vs eager {c.get('graph_vs_eager_max_abs', float('nan')):.3g} "
              f"(|logit| ≤ {c['logit_scale_max_abs']:.3g})")
    columns = ("cache_gib", "peak_above_weights_gib", "eager_ms_per_step", "ms_per_step", "tokens_per_s")
    print("| model | context | cache GiB | peak above weights GiB | eager ms/step | graphed ms/step | tok/s |")
    for r in rows:
        cells = [r.get("error", "")] if "error" in r else [f"{r[key]:.2f}" for key in columns]
        print("| " + " | ".join([r["model"], str(r["context"]), *cells]) + " |")
    for c in compared:
        print(f"context {c['context']}: hybrid/teacher cache {c['cache_ratio']:.3f} (≤ {MAX_CACHE_RATIO}: "
              f"{c['cache_ok']}), graphed speedup {c['speedup']:.2f}× (≥ {MIN_SPEEDUP}: {c['speed_ok']}), "
              f"eager speedup {c['eager_speedup']:.2f}×")


if __name__ == "__main__":
    main()
