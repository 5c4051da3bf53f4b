"""Bridge-isolated needle in a haystack (seed 000, Fig. 2): a bridge alone, between a token embedding and a
linear readout at the last position, learns to name the one needle token (one of ``num_values``) hidden at a
depth of a sequence of distractor tokens, then is scored over a depth x length grid.

Sequence: distractors drawn from ``noise_tokens``, the needle at position round(depth·(L−2)), and a query
token last. The readout reads the bridge's output at the query, so every causal bridge has seen the whole
sequence there. Tokens: ``[0, noise)`` distractors, ``[noise, noise + values)`` needles, then the query.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..config.lia_mtr import BridgeConfig
from ..devices import model_device
from ..layers.bridges import Bridge


def niah_batch(rng: np.random.Generator, cfg, batch: int, length: int, depth: float | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """``tokens [batch, length]`` and ``targets [batch]`` (the needle's class); depth random when None."""
    tokens = rng.integers(0, cfg.noise_tokens, size=(batch, length))
    values = rng.integers(0, cfg.num_values, size=batch)
    if depth is None:
        where = rng.integers(0, length - 1, size=batch)
    else:
        where = np.full(batch, int(round(depth * (length - 2))))
    tokens[np.arange(batch), where] = cfg.noise_tokens + values
    tokens[:, -1] = cfg.noise_tokens + cfg.num_values
    return torch.from_numpy(tokens), torch.from_numpy(values)


class NIAHProbe(nn.Module):
    """Embedding -> bridge -> linear readout at the last position: ``tokens [B, L] -> logits [B, values]``."""

    def __init__(self, bridge_name: str, cfg, bridge: BridgeConfig, backend: str = "auto"):
        super().__init__()
        self.embed = nn.Embedding(cfg.noise_tokens + cfg.num_values + 1, cfg.dim)
        self.bridge = Bridge(bridge_name, cfg.dim, cfg.dim, bridge, backend)
        self.readout = nn.Linear(cfg.dim, cfg.num_values)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.readout(self.bridge(self.embed(tokens))[:, -1])


def train_probe(model: NIAHProbe, cfg, seed: int, progress: bool = True) -> list[dict]:
    """AdamW on random depths, cycling through ``train_lengths``, on the model's device; returns the logged
    history."""
    import math
    import sys

    from tqdm import tqdm

    train = cfg.train
    device = model_device(model)
    rng = np.random.default_rng([seed, 1])
    opt = torch.optim.AdamW(model.parameters(), lr=train.lr, weight_decay=train.weight_decay,
                            betas=tuple(train.betas))
    history, window = [], []
    for step in tqdm(range(1, train.steps + 1), desc="niah", file=sys.stderr, disable=not progress):
        warm = min(1.0, step / max(1, train.warmup_steps))
        cosine = 0.5 * (1 + math.cos(math.pi * step / train.steps))
        for group in opt.param_groups:
            group["lr"] = train.lr * warm * (train.min_lr_ratio + (1 - train.min_lr_ratio) * cosine)
        tokens, targets = niah_batch(rng, cfg, train.batch_size, cfg.train_lengths[step % len(cfg.train_lengths)])
        tokens, targets = tokens.to(device), targets.to(device)
        logits = model(tokens)
        loss = nn.functional.cross_entropy(logits, targets)
        opt.zero_grad()
        loss.backward()
        if train.clip_grad_norm:
            nn.utils.clip_grad_norm_(model.parameters(), train.clip_grad_norm)
        opt.step()
        window.append((loss.item(), (logits.argmax(-1) == targets).float().mean().item()))
        if step % train.log_every == 0 or step == train.steps:
            history.append({"step": step, "loss": sum(w[0] for w in window) / len(window),
                            "accuracy": sum(w[1] for w in window) / len(window)})
            window = []
    return history


@torch.no_grad()
def evaluate_grid(model: NIAHProbe, cfg, seed: int) -> tuple[list[dict], list[dict]]:
    """Accuracy per (length, depth) over ``test_examples`` sequences each, and every sequence's outcome
    (``length, depth, correct``; the same sequences for every bridge, so comparisons pair them)."""
    model.eval()
    device = model_device(model)
    rows, items = [], []
    for length in cfg.lengths:
        for depth in cfg.depths:
            rng = np.random.default_rng([seed, 2, length, int(depth * 1000)])
            tokens, targets = niah_batch(rng, cfg, cfg.test_examples, length, depth)
            correct = (model(tokens.to(device)).argmax(-1).cpu() == targets).tolist()
            rows.append({"length": length, "depth": depth, "accuracy": round(sum(correct) / len(correct), 4),
                         "n": len(correct)})
            items += [{"length": length, "depth": depth, "correct": int(c)} for c in correct]
    return rows, items
