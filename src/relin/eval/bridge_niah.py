"""Bridge-isolated needle in a haystack (seed 000, Fig. 2): a bridge alone, between a token embedding and a
linear readout at the last position, learns to name the one needle token (one of ``num_values``) hidden at a
depth of a sequence of distractor tokens, then is scored over a depth x length grid. It trains through the
one training loop (:func:`relin.train.loop.train`: its batch source :class:`NIAHBatches`, the ``readout_ce``
objective), so every option of its ``train`` section applies, with resume and per-step metrics.

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

    def save_pretrained(self, directory, safe_serialization: bool = True) -> None:
        """The weights (safetensors) and the bridge's spec, as every trained model of the DAG is saved."""
        import json
        from pathlib import Path

        from safetensors.torch import save_file

        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in self.state_dict().items()}, directory / "model.safetensors")
        (directory / "probe.json").write_text(json.dumps(self.bridge.spec(), indent=1))


class NIAHBatches:
    """The probe's training batches: ``batch_size`` sequences at random depths per step, drawn from a generator
    seeded by ``(seed, step)`` (a resumed run sees the batches an uninterrupted one would). The length cycles
    through the ``train_lengths`` the curriculum allows at that step (all of them without one)."""

    def __init__(self, cfg, seed: int):
        self.cfg, self.seed = cfg, seed
        self.stages = sorted(cfg.train.curriculum, key=lambda stage: stage.until_step)

    def max_len(self, step: int) -> int:
        stage = next((s for s in self.stages if step <= s.until_step), None)
        return stage.max_len if stage is not None else max(self.cfg.train_lengths)

    def length(self, step: int) -> int:
        allowed = [n for n in self.cfg.train_lengths if n <= self.max_len(step)] or [min(self.cfg.train_lengths)]
        return allowed[step % len(allowed)]

    def micro_batches(self, step: int, count: int) -> list[dict[str, torch.Tensor]]:
        rng = np.random.default_rng([self.seed, 1, step])
        out = []
        for _ in range(count):
            tokens, targets = niah_batch(rng, self.cfg, self.cfg.train.batch_size, self.length(step))
            out.append({"input_ids": tokens, "targets": targets, "attention_mask": torch.ones_like(tokens)})
        return out


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
