"""Teacher training throughput on one GPU: tokens/s and model FLOPs utilisation (MFU) of relin's training loop.

Each teacher family (Qwen3, GPT-NeoX) at ~100M parameters (12 x 768, Pythia-160M's width and depth; Qwen3 also
with its own 128-wide heads, the `h200` overlay's teacher) and at the earlier 8 x 512 / 6 x 512 overlay shapes.
relin's own loop (:func:`relin.train.loop.train`, AdamW, bf16 autocast, the
teacher stage's cross-entropy objective) trains on random token rows of ``--seq`` tokens (a vocabulary of
``--vocab`` words), ``--batch`` rows per step. Per case: parameters, tokens/s over the logged intervals after the
first (autotuning, compilation and allocator warm-up excluded), and MFU, the model FLOPs per token (PaLM's count: 6 per
parameter of every matrix product, LM head included, plus 12 · layers · width · context for attention) times
tokens/s over the GPU's dense bf16 peak (``--peak-tflops``, H200: 989).

    python benchmarks/gpu/teacher_train.py --out $OUT                   # H200
    python benchmarks/gpu/teacher_train.py --seq 64 --steps 4 --only tiny   # CPU dry run
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch

from relin.envelope import Envelope

# (family, hidden, layers, heads, kv heads, head dim, intermediate)
SHAPES = {
    "qwen3-h200": ("qwen3", 512, 8, 8, 4, 64, 1536),
    "gpt_neox-h200": ("gpt_neox", 512, 6, 8, 8, 64, 2048),
    "qwen3-100m": ("qwen3", 768, 12, 12, 4, 64, 2048),
    "qwen3-100m-hd128": ("qwen3", 768, 12, 8, 4, 128, 2048),
    "gpt_neox-100m": ("gpt_neox", 768, 12, 12, 12, 64, 3072),
    "tiny": ("qwen3", 64, 2, 4, 2, 16, 128),
}


# benchmark mode -> (train.compile, train.compile_mode)
MODES = {"eager": (False, "default"), "compiled": (True, "default"),
         "autotuned": (True, "max-autotune-no-cudagraphs")}


def teacher(name: str, vocab: int, seq: int):
    from relin.config.teacher import TeacherModelConfig
    from relin.data.tokenizer import build_tokenizer
    from relin.models.teachers import build_teacher

    family, hidden, layers, heads, kv, head_dim, inter = SHAPES[name]
    extra = {"num_key_value_heads": kv, "head_dim": head_dim} if family == "qwen3" else {"rotary_pct": 0.25}
    cfg = TeacherModelConfig(family=family, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                             intermediate_size=inter, max_position_embeddings=max(seq, 64), **extra)
    tokenizer = build_tokenizer("word", [f"w{i}" for i in range(vocab)])
    return build_teacher(cfg, tokenizer, seed=0), tokenizer


def flops_per_token(model, seq: int) -> float:
    """PaLM's model FLOPs per trained token: 6 per weight of every matrix product (input embedding excluded, a
    tied LM head counted once as the head) plus 12 · layers · width · context for the attention products."""
    config = model.config
    weights = sum(p.numel() for n, p in model.named_parameters() if p.dim() == 2)
    embedding = model.get_input_embeddings().weight
    if embedding is not model.get_output_embeddings().weight:
        weights -= embedding.numel()
    width = config.num_attention_heads * getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)
    return 6 * weights + 12 * config.num_hidden_layers * width * seq


class ProfilerSteps:
    """A tracker for :func:`relin.train.loop.train` (``log_every`` 1) that advances a torch profiler each step."""

    def __init__(self, profiler):
        self.profiler, self.facts = profiler, {}

    def log_metrics(self, metrics, step=None):
        self.profiler.step()

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def profile(name: str, mode: str, step_ms: float, args, warmup: int = 6, active: int = 4) -> None:
    """Kernel time per step over ``active`` steps after ``warmup`` (compilation and autotuning done) against the
    measured ``step_ms``, and the kernels that take the most of it."""
    from torch.profiler import ProfilerActivity, schedule
    from torch.profiler import profile as torch_profile

    from relin.config.train import TrainConfig
    from relin.train.batching import StepBatches
    from relin.train.loop import train
    from relin.train.objectives import build_objective

    model, tokenizer = teacher(name, args.vocab, args.seq)
    rows = torch.randint(4, len(tokenizer), (args.batch * 8, args.seq), generator=torch.Generator().manual_seed(0))
    batches = StepBatches(rows.tolist(), rows.tolist(), batch_size=args.batch, pad_id=tokenizer.pad_token_id, seed=0)
    compiled, compile_mode = MODES[mode]
    cfg = TrainConfig(steps=warmup + active + 1, batch_size=args.batch, lr=3e-4, warmup_steps=1, log_every=1,
                      checkpoint_every=warmup + active + 2, bucket_by_length=False, compile=compiled,
                      compile_mode=compile_mode)
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                       schedule=schedule(wait=0, warmup=warmup, active=active, repeat=1)) as prof:
        with tempfile.TemporaryDirectory() as tmp:
            train(model, build_objective("ce"), batches, cfg, checkpoint_root=tmp, progress=False,
                  tracker=ProfilerSteps(prof))
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    kernel_ms = sum(e.self_device_time_total for e in events) / active / 1000
    print(f"profile {name} {mode}: {kernel_ms:.1f} ms of kernels per step of "
          f"{step_ms:.1f} ms ({100 * kernel_ms / step_ms:.0f}% busy), "
          f"{sum(e.count for e in events) / active:.0f} kernels per step")
    for e in sorted(events, key=lambda e: -e.self_device_time_total)[:14]:
        print(f"  {e.self_device_time_total / active / 1000:7.2f} ms {e.count / active:5.0f}x  {e.key[:90]}")


def measure(name: str, mode: str, args) -> dict:
    from relin.config.train import TrainConfig
    from relin.train.batching import StepBatches
    from relin.train.loop import train
    from relin.train.objectives import build_objective

    model, tokenizer = teacher(name, args.vocab, args.seq)
    generator = torch.Generator().manual_seed(0)
    rows = torch.randint(4, len(tokenizer), (args.batch * 8, args.seq), generator=generator).tolist()
    batches = StepBatches(rows, rows, batch_size=args.batch, pad_id=tokenizer.pad_token_id, seed=0)
    compiled, compile_mode = MODES[mode]
    cfg = TrainConfig(steps=args.steps, batch_size=args.batch, lr=3e-4, warmup_steps=1, log_every=args.log_every,
                      checkpoint_every=args.steps + 1, bucket_by_length=False, compile=compiled,
                      compile_mode=compile_mode)
    with tempfile.TemporaryDirectory() as tmp:
        result = train(model, build_objective("ce"), batches, cfg, checkpoint_root=tmp, progress=False)
    rates = [row["tokens_per_s"] for row in result.history][1:] or [row["tokens_per_s"] for row in result.history]
    tokens_per_s = sum(rates) / len(rates)
    flops = flops_per_token(result.model, args.seq)
    params = sum(p.numel() for p in result.model.parameters())
    return {"case": name, "compiled": compiled, "mode": mode, "parameters": params, "seq": args.seq,
            "batch": args.batch, "steps": args.steps,
            "tokens_per_s": round(tokens_per_s), "steps_per_s": round(tokens_per_s / (args.batch * args.seq), 2),
            "flops_per_token": flops, "mfu": round(tokens_per_s * flops / (args.peak_tflops * 1e12), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(SHAPES), default=[s for s in SHAPES if s != "tiny"])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=["eager", "compiled"],
                        help="the loop as is, with train.compile (torch.compile of the model), and with its "
                             "compile_mode max-autotune-no-cudagraphs")
    parser.add_argument("--profile", action="store_true", help="also profile a few steps of each case")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak of the GPU")
    parser.add_argument("--out", default="benchmarks/results")
    parser.add_argument("--json", default="teacher_train.json", help="file name under --out")
    Envelope.add_argument(parser)
    args = parser.parse_args()
    envelope = Envelope.start("teacher_train", allow_dirty=args.allow_dirty)

    meta = {"peak_tflops": args.peak_tflops}
    rows = []
    for name, mode in ((name, mode) for name in args.only for mode in args.modes):
        rows.append(measure(name, mode, args))
        print(json.dumps(rows[-1]), flush=True)
        if args.profile and torch.cuda.is_available():
            profile(name, mode, 1000 / rows[-1]["steps_per_s"], args)
        envelope.write(Path(args.out) / args.json, {**meta, "rows": rows})
    print(f"\nrows of {args.seq} tokens, {args.batch} per step")
    print("| case | loop | parameters | tokens/s | steps/s | MFU |")
    for r in rows:
        print(f"| {r['case']} | {r['mode']} | {r['parameters'] / 1e6:.1f}M | "
              f"{r['tokens_per_s']} | {r['steps_per_s']} | {100 * r['mfu']:.1f}% |")


if __name__ == "__main__":
    main()
