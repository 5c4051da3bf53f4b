"""Teacher-forced scoring: one forward pass per batch, read at the labelled positions.

Labels follow the Hugging Face convention of the ``synth_text`` rows: ``labels[t]`` is the token
expected at position ``t`` (``-100`` where unsupervised), so it is predicted by the logits at
``t - 1``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..artifacts import IGNORE_INDEX, next_token_pairs
from ..devices import model_device
from .batches import equal_length_batches


@dataclass(frozen=True)
class LabelScore:
    """One example's labelled positions: summed negative log-likelihood (nats), argmax hits, count; with position
    bins, ``(nll, count)`` of the labelled tokens in each bin."""

    nll: float
    correct: int
    count: int
    by_position: tuple[tuple[float, int], ...] = ()


@torch.inference_mode()
def score_labels(model, input_ids: list[list[int]], labels: list[list[int]], batch_size: int,
                 bins: tuple[tuple[int, int | None], ...] = ()) -> list[LabelScore]:
    """Score every example at its labelled positions, in equal-length batches.

    Args:
        model: a causal LM; ``model(input_ids=[B, T]).logits`` is ``[B, T, V]``.
        input_ids: token ids per example (any lengths).
        labels: per example, as long as its ``input_ids``; ``-100`` where unsupervised.
        batch_size: examples per forward pass.
        bins: token positions ``(first, last)`` (``input_ids`` index, bos at 0; ``last`` None: to the end) whose
            labelled tokens are also summed apart (``LabelScore.by_position``).

    Returns:
        One :class:`LabelScore` per example, in input order.
    """
    device = model_device(model)
    scores: list[LabelScore | None] = [None] * len(input_ids)
    for batch in equal_length_batches([len(ids) for ids in input_ids], batch_size):
        ids = torch.tensor([input_ids[i] for i in batch], device=device)
        logits, target = next_token_pairs(model(input_ids=ids).logits.float(),
                                          torch.tensor([labels[i] for i in batch], device=device))
        mask = target != IGNORE_INDEX
        safe_target = target.clamp(min=0)
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), safe_target, reduction="none")
        hits = (logits.argmax(-1) == safe_target) & mask
        # target[:, t] is the token at position t + 1 of input_ids
        position = torch.arange(1, mask.shape[1] + 1, device=device)
        in_bin = [mask & (position >= first) & (position <= (last if last is not None else mask.shape[1]))
                  for first, last in bins]
        for row, index in enumerate(batch):
            by_position = tuple((float(nll[row][b[row]].sum()), int(b[row].sum())) for b in in_bin)
            scores[index] = LabelScore(nll=float(nll[row][mask[row]].sum()), correct=int(hits[row].sum()),
                                       count=int(mask[row].sum()), by_position=by_position)
    return scores
