"""Decode step time of an OPAL hybrid against its Qwen3 teacher at its best, each against its bandwidth floor.

The models are :mod:`hybrid_decode`'s: a Qwen3 of a named size from its config with random bf16 weights, and
its OPAL conversion (every 4th layer attention, the rest Gated DeltaNet on relin's Triton kernels). Four decoders:

- ``hybrid``: relin's hybrid on ``StaticHybridCache``, attention layers on ``relin.kernels.flash_decoding``;
- ``teacher``: the same teacher as a relin model of attention layers only (exact: the conversion copies every
  weight), on the same static cache and decode kernel;
- ``teacher_hf_static``: transformers' ``StaticCache``, step ``model(token, cache_position=..., past_key_values=...)``;
- ``teacher_hf_dynamic``: transformers' own eager path, a ``DynamicCache``.

Static-cache steps (forward, argmax written back into the token buffer, position advanced) are captured once in
a ``torch.cuda.CUDAGraph`` (for HF's static cache ``torch.compile(mode="reduce-overhead")`` is the fallback if
capture fails; the JSON says which ran) and replayed; the dynamic cache steps eagerly. The teacher at its best
is the fastest of the three teacher decoders per context.

Per (decoder, context): cache bytes, ms per step (CUDA events, after warmup), tokens/s, and the bandwidth floor:
the bytes one step must read (every weight once, the filled KV, the recurrent and conv states read and written)
over the copy bandwidth measured on this GPU. The prefill runs eager in chunks through the same cache, untimed.

Before timing, a consistency check at ``--check-context`` per relin model and HF's static path: the logits of one
decode step through the dynamic cache, through the static cache eagerly, and through the graph replayed from the
same state. On a CPU (``--size tiny``) graphs are skipped and static steps are timed eagerly: a dry run.

    python benchmarks/gpu/hybrid_decode_graphed.py --size 1.7b --batch 16 --contexts 8192 32768 --out $OUT
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hybrid_decode import DEVICE, SIZES, hybrid_of, qwen3, sync  # noqa: E402

from relin.envelope import Envelope  # noqa: E402

GRAPHS = DEVICE == "cuda"
# Targets at the longest context: hybrid cache ≤ 30% of the teacher's, its step ≥ 2.5× faster than the teacher at
# its best; every decoder within 2× of its bandwidth floor.
MAX_CACHE_RATIO, MIN_SPEEDUP, MAX_FLOOR_RATIO = 0.30, 2.5, 2.0
TEACHERS = ("teacher", "teacher_hf_static", "teacher_hf_dynamic")


def is_hybrid(model) -> bool:
    return getattr(model.config, "model_type", "") == "relin_hybrid"


class Decoder:
    """One model's static cache, its token/position buffers and its greedy decode step, eager or
    captured in a CUDA graph. ``batch`` rows of up to ``max_length`` tokens."""

    def __init__(self, model, batch: int, max_length: int, dynamic: bool = False):
        self.model, self.hybrid, self.max_length, self.dynamic = model, is_hybrid(model), max_length, dynamic
        if self.hybrid:
            from relin.models.hybrid import StaticHybridCache

            self.cache = StaticHybridCache.allocate(model, batch, max_length)
        elif dynamic:
            from transformers import DynamicCache

            self.cache = DynamicCache(config=model.config)
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
        if self.dynamic:
            logits = self.model(input_ids=ids, past_key_values=self.cache, use_cache=True,
                                logits_to_keep=1).logits[:, -1]
            self.position.add_(ids.shape[1])
            return logits
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

    def step_bytes(self, context: int) -> int:
        """Bytes one step must read at ``context`` filled slots: every weight once (the input embedding only
        gathers rows, so an untied one is not counted), the filled KV, and the states read and written."""
        weights = {p.data_ptr(): p.nbytes for p in self.model.parameters()}
        embedding = self.model.get_input_embeddings().weight
        if embedding.data_ptr() != self.model.get_output_embeddings().weight.data_ptr():
            weights.pop(embedding.data_ptr())
        kv, state = self.nbytes()
        slots = len_of(self.cache) if self.dynamic else self.max_length
        return sum(weights.values()) + kv * context // max(slots, 1) + 2 * state


def len_of(cache) -> int:
    """Tokens a transformers DynamicCache holds."""
    return cache.get_seq_length()


def copy_bandwidth(gib: float = 4.0) -> float:
    """Bytes per second of a device-to-device copy (bytes read + written), the best of a few."""
    if DEVICE != "cuda":
        return float("nan")
    x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device=DEVICE)
    y = torch.empty_like(x)
    best = float("inf")
    for _ in range(6):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y.copy_(x)
        stop.record()
        stop.synchronize()
        best = min(best, start.elapsed_time(stop) / 1000)
    del x, y
    return 2 * gib * 2**30 / best


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
def measure(model, context: int, batch: int, decode_steps: int, eager_steps: int, chunk: int, vocab: int,
            bandwidth: float, dynamic: bool = False) -> dict:
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    resident = torch.cuda.memory_allocated() if DEVICE == "cuda" else 0
    ids = random_ids(batch, context, vocab)
    # Slots rounded up to a multiple of 64: SDPA's memory-efficient kernel copies a mask whose last dim is unaligned.
    decoder = Decoder(model, batch, -(-(context + decode_steps + eager_steps + 32) // 64) * 64, dynamic)
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
    if GRAPHS and not dynamic:
        decoder.capture()
    graphed_ms = timed(decoder.replay, decode_steps if not dynamic else eager_steps)
    floor_ms = 1000 * decoder.step_bytes(context) / bandwidth
    row = {"context": context, "batch": batch, "max_length": decoder.max_length, "kv_bytes": kv, "state_bytes": state,
           "cache_gib": (kv + state) / 2**30,
           "peak_above_weights_gib": (torch.cuda.max_memory_allocated() - resident) / 2**30 if DEVICE == "cuda"
           else float("nan"),
           "prefill_s": round(prefill_s, 3), "eager_ms_per_step": round(eager_ms, 3), "graph_mode": decoder.mode,
           "ms_per_step": round(graphed_ms, 3), "tokens_per_s": round(1000 * batch / graphed_ms, 1),
           "step_bytes": decoder.step_bytes(context), "floor_ms": round(floor_ms, 3),
           "floor_ratio": round(graphed_ms / floor_ms, 3)}
    del decoder
    return row


@torch.no_grad()
def profile(name: str, model, batch: int, context: int, vocab: int, steps: int = 3) -> None:
    """The CUDA kernels of ``steps`` eager static-cache steps, by total time (where a step's time goes)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    decoder = Decoder(model, batch, context + 64)
    decoder.prefill(random_ids(batch, context, vocab), 4096)
    decoder.step()
    sync()
    with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            decoder.step()
        sync()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    total = sum(e.self_device_time_total for e in events) / steps / 1000
    launches = sum(e.count for e in events) / steps
    print(f"profile {name} T={context}: {total:.2f} ms of kernels per step, {launches:.0f} kernels per step")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:14]:
        print(f"  {e.self_device_time_total / steps / 1000:7.3f} ms  {e.count / steps:5.0f}×  {e.key[:90]}")
    del decoder


def ratios(rows: list[dict]) -> list[dict]:
    """Per context: hybrid/teacher cache, the teacher at its best (its fastest decoder), the speed-up against it,
    and the targets."""
    by = {(r["model"], r["context"]): r for r in rows if "error" not in r}
    out = []
    for context in sorted({c for _, c in by}):
        hybrid = by.get(("hybrid", context))
        teachers = [by[(t, context)] for t in TEACHERS if (t, context) in by]
        if not hybrid or not teachers:
            continue
        best = min(teachers, key=lambda r: r["ms_per_step"])
        cache = hybrid["cache_gib"] / by.get(("teacher", context), best)["cache_gib"]
        speedup = best["ms_per_step"] / hybrid["ms_per_step"]
        out.append({"context": context, "teacher_best": best["model"], "teacher_best_ms": best["ms_per_step"],
                     "cache_ratio": round(cache, 4), "speedup": round(speedup, 3), "cache_ok": cache <= MAX_CACHE_RATIO,
                     "speed_ok": speedup >= MIN_SPEEDUP,
                     "floors_ok": {r["model"]: r["floor_ratio"] <= MAX_FLOOR_RATIO for r in (hybrid, *teachers)}})
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
    parser.add_argument("--profile", action="store_true", help="print each relin decoder's CUDA kernels per step "
                                                                  "at the first context, then time")
    parser.add_argument("--out", default="benchmarks/results")
    Envelope.add_argument(parser)
    args = parser.parse_args()
    envelope = Envelope.start("hybrid_decode_graphed", allow_dirty=args.allow_dirty)

    teacher = qwen3(args.size, max(args.contexts) + args.decode_steps + args.eager_steps + 64)
    hybrid = hybrid_of(teacher)
    relin_teacher = hybrid_of(teacher, keep_every=1)
    vocab = teacher.config.vocab_size
    bandwidth = copy_bandwidth()
    meta = {"size": args.size,
            "dtype": str(next(teacher.parameters()).dtype), "mixer_types": hybrid.config.mixer_types,
            "decode_steps": args.decode_steps, "eager_steps": args.eager_steps, "prefill_chunk": args.prefill_chunk,
            "copy_bandwidth_gb_s": round(bandwidth / 1e9, 1),
            "targets": {"max_cache_ratio": MAX_CACHE_RATIO, "min_speedup": MIN_SPEEDUP,
                        "max_floor_ratio": MAX_FLOOR_RATIO}}
    checks, rows = [], []

    def save() -> None:  # after every row, so that a run stopped early keeps what it measured
        envelope.write(Path(args.out) / "hybrid_decode_graphed.json",
                       {**meta, "checks": checks, "rows": rows, "ratios": ratios(rows)})

    for name, model in (("hybrid", hybrid), ("teacher", relin_teacher), ("teacher_hf_static", teacher)):
        checks.append({"model": name, **consistency(model, args.batch, args.check_context, vocab)})
        print(json.dumps(checks[-1]), flush=True)
        save()
    if args.profile and DEVICE == "cuda":
        for name, model in (("hybrid", hybrid), ("teacher", relin_teacher)):
            profile(name, model, args.batch, args.contexts[0], vocab)
    decoders = (("hybrid", hybrid, False), ("teacher", relin_teacher, False), ("teacher_hf_static", teacher, False),
                ("teacher_hf_dynamic", teacher, True))
    for name, model, dynamic in decoders:
        for context in args.contexts:
            try:
                row = measure(model, context, args.batch, args.decode_steps, args.eager_steps, args.prefill_chunk,
                              vocab, bandwidth, dynamic)
            except torch.OutOfMemoryError:
                row = {"context": context, "batch": args.batch, "error": "out of memory"}
            rows.append({"model": name, **row})
            print(json.dumps(rows[-1]), flush=True)
            save()
    compared = ratios(rows)

    print(f"\nQwen3-{args.size} shape, batch {args.batch}, {DEVICE}, copy bandwidth "
          f"{meta['copy_bandwidth_gb_s']} GB/s")
    for c in checks:
        print(f"check {c['model']:18} T={c['context']}: static vs dynamic {c['static_vs_dynamic_max_abs']:.3g}, "
              f"graph vs eager {c.get('graph_vs_eager_max_abs', float('nan')):.3g} "
              f"(|logit| ≤ {c['logit_scale_max_abs']:.3g})")
    columns = ("cache_gib", "ms_per_step", "floor_ms", "floor_ratio", "tokens_per_s")
    print("| decoder | context | mode | cache GiB | ms/step | floor ms | × floor | tok/s |")
    for r in rows:
        cells = [r.get("error", "")] if "error" in r else [r["graph_mode"], *(f"{r[key]:.2f}" for key in columns)]
        print("| " + " | ".join([r["model"], str(r["context"]), *cells]) + " |")
    for c in compared:
        print(f"context {c['context']}: hybrid/teacher cache {c['cache_ratio']:.3f} (≤ {MAX_CACHE_RATIO}: "
              f"{c['cache_ok']}); teacher at its best: {c['teacher_best']} {c['teacher_best_ms']:.2f} ms; "
              f"speed-up {c['speedup']:.2f}× (≥ {MIN_SPEEDUP}: {c['speed_ok']}); within {MAX_FLOOR_RATIO}× of "
              f"floor: {c['floors_ok']}")


if __name__ == "__main__":
    main()
