"""Decode memory and throughput of an OPAL hybrid against its Qwen3 teacher at long context (OPAL Fig. 4).

A Qwen3 of a named size is built from its transformers config (random weights: speed and memory do not
depend on them), converted with ``relin.models.convert.opal.convert`` (every 4th layer kept as attention,
the rest Gated DeltaNet on relin's Triton kernels), and both decode greedily after a prefill of each
context length. Per (model, context) it records:

- the cache bytes after the prefill (keys/values; recurrent and conv states), exact;
- peak allocated memory over prefill + decode (``torch.cuda.max_memory_allocated``);
- ms per decode step and tokens/s (eager, no CUDA graphs: both models pay the same Python overhead).

The prefill runs in chunks (``--prefill-chunk``) through the cache, so that a dense attention mask never
holds ``context²`` entries. Writes ``hybrid_decode.json`` (the envelope of :mod:`relin.envelope`, rows) to ``--out``.

    python benchmarks/gpu/hybrid_decode.py --size 1.7b --contexts 4096 16384 65536 --out $OUT
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from relin.envelope import Envelope
from relin.eval.decode_speed import cache_bytes

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()

# Qwen3 shapes (hidden, intermediate, layers, heads, kv heads, head dim), from the released configs.
SIZES = {
    "tiny": (64, 128, 4, 4, 2, 16),  # a dry run of the script on the CPU
    "0.6b": (1024, 3072, 28, 16, 8, 128),
    "1.7b": (2048, 6144, 28, 16, 8, 128),
    "4b": (2560, 9728, 36, 32, 8, 128),
}


def qwen3(size: str, max_positions: int):
    from transformers import Qwen3Config, Qwen3ForCausalLM

    hidden, inter, layers, heads, kv, head_dim = SIZES[size]
    config = Qwen3Config(vocab_size=151936, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=kv, head_dim=head_dim,
                         max_position_embeddings=max_positions, tie_word_embeddings=True)
    config._attn_implementation = "sdpa"
    with torch.device(DEVICE):
        return Qwen3ForCausalLM(config).to(DTYPE).eval().requires_grad_(False)


def hybrid_of(teacher, keep_every: int = 4):
    """OPAL's conversion of ``teacher`` keeping every ``keep_every``-th layer as attention (1: all of them, the
    teacher itself as a relin model)."""
    from relin.config.opal import kept_attention_layers
    from relin.models.convert.opal import convert

    layers = teacher.config.num_hidden_layers
    kept = set(kept_attention_layers(layers, keep_every))
    types = ["attention" if i in kept else "gdn" for i in range(layers)]
    return convert(teacher, types, kernel_backend="auto").to(DEVICE, DTYPE).eval().requires_grad_(False)


def step(model, ids, mask, cache):
    """One forward through the cache; returns (last logits, cache) for either model class."""
    if getattr(model.config, "model_type", "") == "relin_hybrid":
        out = model(input_ids=ids, attention_mask=mask, cache=cache, use_cache=True, logits_to_keep=1)
        return out.logits[:, -1], out.cache
    out = model(input_ids=ids, attention_mask=mask, past_key_values=cache, use_cache=True, logits_to_keep=1)
    return out.logits[:, -1], out.past_key_values


@torch.no_grad()
def measure(model, context: int, batch: int, decode_steps: int, chunk: int, vocab: int) -> dict:
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    g = torch.Generator(device=DEVICE).manual_seed(context)
    ids = torch.randint(4, vocab, (batch, context), generator=g, device=DEVICE)
    cache, logits = None, None
    sync()
    began = time.perf_counter()
    for start in range(0, context, chunk):
        mask = torch.ones(batch, min(start + chunk, context), dtype=torch.long, device=DEVICE)
        logits, cache = step(model, ids[:, start:start + chunk], mask, cache)
    sync()
    prefill_s = time.perf_counter() - began
    kv, state = cache_bytes(cache)
    token = logits.argmax(-1)
    for warm in range(2):  # first decode steps compile/choose kernels; not timed
        mask = torch.ones(batch, context + warm + 1, dtype=torch.long, device=DEVICE)
        logits, cache = step(model, token[:, None], mask, cache)
        token = logits.argmax(-1)
    sync()
    began = time.perf_counter()
    for i in range(decode_steps):
        mask = torch.ones(batch, context + 3 + i, dtype=torch.long, device=DEVICE)
        logits, cache = step(model, token[:, None], mask, cache)
        token = logits.argmax(-1)
    sync()
    seconds = time.perf_counter() - began
    return {"context": context, "batch": batch, "kv_bytes": kv, "state_bytes": state, "cache_gib": (kv + state) / 2**30,
            "peak_gib": torch.cuda.max_memory_allocated() / 2**30 if DEVICE == "cuda" else float("nan"),
            "prefill_s": round(prefill_s, 3), "ms_per_step": round(1000 * seconds / decode_steps, 3),
            "tokens_per_s": round(batch * decode_steps / seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="1.7b")
    parser.add_argument("--contexts", type=int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--decode-steps", type=int, default=32)
    parser.add_argument("--prefill-chunk", type=int, default=4096)
    parser.add_argument("--out", default="benchmarks/results")
    Envelope.add_argument(parser)
    args = parser.parse_args()
    envelope = Envelope.start("hybrid_decode", allow_dirty=args.allow_dirty)

    teacher = qwen3(args.size, max(args.contexts) + args.decode_steps + 8)
    hybrid = hybrid_of(teacher)
    rows = []
    for name, model in (("hybrid", hybrid), ("teacher", teacher)):
        for context in args.contexts:
            try:
                row = measure(model, context, args.batch, args.decode_steps, args.prefill_chunk,
                              teacher.config.vocab_size)
            except torch.OutOfMemoryError:
                row = {"context": context, "batch": args.batch, "error": "out of memory"}
            rows.append({"model": name, **row})
            print(json.dumps(rows[-1]), flush=True)
    meta = {"size": args.size, "mixer_types": hybrid.config.mixer_types, "decode_steps": args.decode_steps,
            "prefill_chunk": args.prefill_chunk}
    envelope.write(Path(args.out) / "hybrid_decode.json", {**meta, "rows": rows})

    print(f"\nQwen3-{args.size} shape, batch {args.batch}, {DEVICE}")
    print(f"{'model':8} {'context':>8} {'cache GiB':>10} {'peak GiB':>9} {'prefill s':>10} {'ms/step':>8} {'tok/s':>8}")
    for r in rows:
        if "error" in r:
            print(f"{r['model']:8} {r['context']:>8} {r['error']}")
            continue
        print(f"{r['model']:8} {r['context']:>8} {r['cache_gib']:>10.3f} {r['peak_gib']:>9.2f} {r['prefill_s']:>10.3f} "
              f"{r['ms_per_step']:>8.2f} {r['tokens_per_s']:>8.1f}")


if __name__ == "__main__":
    main()
