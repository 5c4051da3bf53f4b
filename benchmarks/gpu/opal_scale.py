"""OPAL at a real model's shape: stage-2 distillation steps at 4K-token rows with and without gradient
checkpointing, and on-policy rollouts of 16 prompts x 1K sampled tokens, timed on one GPU.

The models are :mod:`hybrid_decode`'s: a Qwen3 0.6B-shaped teacher with random bf16 weights (vocabulary 151936)
and its OPAL hybrid (every 4th layer attention, the rest Gated DeltaNet on relin's Triton kernels). Stage 2 is
relin's own objective (:class:`relin.train.objectives.kd.Distillation`, forward KL on every position, the
teacher frozen) with AdamW on the student's bf16 parameters; each configuration reports tokens/s over the timed
steps and the peak memory. Rollouts (temperature 1, no early stop) of the hybrid go through the two decoders stage
3 can use: :func:`relin.models.generation.sample` (the cache grown each step, one forward launched from Python
per token) and :class:`relin.models.static_sampler.StaticSampler` (what stage 3 uses on a GPU: a static cache, the
decode step replayed from a CUDA graph); the teacher's through ``sample``, for reference.

    python benchmarks/gpu/opal_scale.py --out $OUT          # H200
    python benchmarks/gpu/opal_scale.py --batches --out $OUT   # rollouts only
    python benchmarks/gpu/opal_scale.py --size tiny --seq 256 --rollout-tokens 32   # CPU dry run
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

import torch  # noqa: E402

from relin.envelope import Envelope  # noqa: E402


def _sibling(name: str):
    """A module beside this script, imported without putting this directory on sys.path."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_decode = _sibling("hybrid_decode")
DEVICE, hybrid_of, qwen3, sync = _decode.DEVICE, _decode.hybrid_of, _decode.qwen3, _decode.sync


def peak_gib() -> float:
    return torch.cuda.max_memory_allocated() / 2**30 if DEVICE == "cuda" else float("nan")


def reset_peak() -> None:
    if DEVICE == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def stage2(teacher, size: str, seq: int, batch: int, checkpointing: bool, steps: int, warmup: int) -> dict:
    """Distillation steps of a fresh hybrid on random rows of ``batch x seq`` tokens."""
    from relin.train.objectives.kd import Distillation
    from relin.train.teacher import FrozenTeacher
    from relin.train.trainable import enable_gradient_checkpointing

    student = hybrid_of(teacher).train().requires_grad_(True)  # hybrid_of freezes it for decoding
    if checkpointing:
        enable_gradient_checkpointing(student)
    objective = Distillation(FrozenTeacher(teacher), "forward_kl")
    optimizer = torch.optim.AdamW([p for p in student.parameters() if p.requires_grad], lr=1e-5)
    g = torch.Generator(device=DEVICE).manual_seed(0)
    reset_peak()
    row = {"checkpointing": checkpointing, "seq": seq, "batch": batch}
    try:
        for i in range(warmup + steps):
            if i == warmup:
                sync()
                began = time.perf_counter()
            ids = torch.randint(4, teacher.config.vocab_size, (batch, seq), generator=g, device=DEVICE)
            out = objective(student, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
            (out.loss_sum / (batch * (seq - 1))).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        sync()
        seconds = (time.perf_counter() - began) / steps
        row.update(step_s=round(seconds, 4), tokens_per_s=round(batch * seq / seconds),
                   peak_gib=round(peak_gib(), 2), loss=round(float(out.loss_sum.detach()) / (batch * (seq - 1)), 4))
    except torch.OutOfMemoryError:
        row.update(step_s=None, tokens_per_s=None, peak_gib="OOM")
    del student, optimizer
    reset_peak()
    return row


def rollouts(model, name: str, prompts: int, prompt_len: int, tokens: int, static: bool = False) -> dict:
    from functools import partial

    from relin.models.generation import sample
    from relin.models.static_sampler import StaticSampler

    g = torch.Generator(device=DEVICE).manual_seed(1)
    ids = torch.randint(4, model.config.vocab_size, (prompts, prompt_len), generator=g, device=DEVICE)
    draw = StaticSampler(model, prompts, prompt_len + tokens).sample if static else partial(sample, model)
    draw(ids, 8, generator=g)  # warm up: kernels' autotuning, the graph's capture
    reset_peak()
    sync()
    began = time.perf_counter()
    new = draw(ids, tokens, temperature=1.0, generator=g)
    sync()
    seconds = time.perf_counter() - began
    return {"model": name, "decoder": "static, CUDA graph" if static and DEVICE == "cuda" else
            "static" if static else "dynamic", "prompts": prompts, "prompt_tokens": prompt_len,
            "sampled": int(new.numel()),
            "seconds": round(seconds, 2), "tokens_per_s": round(new.numel() / seconds),
            "ms_per_step": round(1000 * seconds / tokens, 2), "peak_gib": round(peak_gib(), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="0.6b")
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--batches", type=int, nargs="*", default=[1, 4], help="stage-2 batch sizes (none: skip)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--rollout-prompts", type=int, default=16)
    parser.add_argument("--rollout-tokens", type=int, default=1024)
    parser.add_argument("--out", type=Path, default=Path("build/benchmarks"))
    Envelope.add_argument(parser)
    args = parser.parse_args()
    envelope = Envelope.start("opal_scale", allow_dirty=args.allow_dirty)

    teacher = qwen3(args.size, args.seq + args.rollout_tokens + 256)
    params = sum(p.numel() for p in teacher.parameters())
    train = [stage2(teacher, args.size, args.seq, batch, ckpt, args.steps, args.warmup)
             for batch in args.batches for ckpt in (False, True)]
    hybrid = hybrid_of(teacher)
    roll = [rollouts(hybrid, "hybrid", args.rollout_prompts, 128, args.rollout_tokens),
            rollouts(hybrid, "hybrid", args.rollout_prompts, 128, args.rollout_tokens, static=True),
            rollouts(teacher, "teacher", args.rollout_prompts, 128, args.rollout_tokens)]
    result = {"size": args.size, "teacher_parameters": params, "stage2": train, "rollouts": roll}
    envelope.write(args.out / "opal_scale.json", result)
    print(f"Qwen3 {args.size} ({params / 1e6:.0f}M parameters) teacher -> OPAL hybrid")
    print("stage 2 (forward KL, AdamW)   batch x seq   checkpointing   tokens/s   step s   peak GiB")
    for r in train:
        print(f"{'':30s}{r['batch']:>5d} x {r['seq']:<6d}{str(r['checkpointing']):>14s}"
              f"{str(r['tokens_per_s']):>11s}{str(r['step_s']):>9s}{str(r['peak_gib']):>11s}")
    print("rollouts   decoder             model     prompts x sampled   tokens/s   ms/step   peak GiB")
    for r in roll:
        print(f"{'':11s}{r['decoder']:20s}{r['model']:10s}{r['prompts']:>7d} x {r['sampled'] // r['prompts']:<8d}"
              f"{r['tokens_per_s']:>10d}{r['ms_per_step']:>10.2f}{r['peak_gib']:>11}")


if __name__ == "__main__":
    main()
