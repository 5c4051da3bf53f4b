"""Greedy continuations of prompts, batched by exact prompt length (no padding)."""
from __future__ import annotations

from typing import Callable

import torch

from ..devices import model_device
from .batches import equal_length_batches

# ``(prompts [B, T], max_new_tokens) -> generated tokens [B, max_new_tokens]``
Generator = Callable[[torch.Tensor, int], torch.Tensor]


def greedy_generator(model, eos_token_id: int | None, pad_token_id: int | None) -> Generator:
    """Greedy decoding of ``model`` with its cache (:func:`relin.models.generation.generate`)."""
    from ..models.generation import generate

    device = model_device(model)

    def run(prompts: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        return generate(model, prompts.to(device), max_new_tokens, eos_token_id=eos_token_id,
                        pad_token_id=pad_token_id)

    return run


@torch.inference_mode()
def continuations(generator: Generator, prompts: list[list[int]], max_new_tokens: int, batch_size: int,
                  eos_token_id: int | None) -> list[list[int]]:
    """The generated tokens of each prompt, cut before the first ``eos_token_id``, in input order."""
    out: list[list[int]] = [[] for _ in prompts]
    for batch in equal_length_batches([len(p) for p in prompts], batch_size):
        generated = generator(torch.tensor([prompts[i] for i in batch]), max_new_tokens).tolist()
        for index, tokens in zip(batch, generated):
            if eos_token_id is not None and eos_token_id in tokens:
                tokens = tokens[:tokens.index(eos_token_id)]
            out[index] = tokens
    return out
