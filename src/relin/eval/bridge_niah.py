"""Bridge-isolated needle in a haystack (seed 000, Fig. 2), as key-value retrieval: a bridge alone, between an
embedding of key-value pairs and a linear readout at the last position, learns to return the value of the key
queried at the end, whose pair sits at a depth among distractor pairs. It trains through the one training loop
(:func:`relin.train.loop.train`: its batch source :class:`NIAHBatches`, the ``readout_ce`` objective), so every
option of its ``train`` section applies (a length curriculum, resume, per-step metrics); then it is scored over a
depth x length grid.

A sequence of L positions: the haystack's L − 1 positions with the needle pair (key, value) among them, then the
query: the needle's key with the query slot in place of a value. Each position's feature is the sum of a key and a
value embedding (one patch holds both, as a patch feature holds what it shows). The needle sits at position
round(depth · (L − 2)). The haystack (``haystack``):

- ``noise`` (the default; RULER's niah_single_1 haystack, "the grass is green ..."): filler tokens, each a filler
  word (``[num_keys, num_keys + num_filler)``) with the no-value slot, which a write gate can learn to keep out of
  the state, as the seed credits its gate with doing ("restricted the accumulation of background noise");
- ``distractors``: key-value pairs whose keys all differ from the needle's (they may repeat among themselves); no gate
  can single out the needle there, since the key that matters is named only at the end (a named variant,
  ``workflow/configs/niah_distractors.yaml``).

Keys ``[0, num_keys)``, values ``[0, num_values)``, the query slot ``num_values``, the no-value slot
``num_values + 1``; the answer is the needle's value.
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
    """``pairs [batch, length, 2]`` (key, value per position; the last is the query) and ``targets [batch]``, the
    needle's value. The needle's depth is random when None."""
    needle_keys = rng.integers(0, cfg.num_keys, size=batch)
    if cfg.haystack == "noise":
        keys = cfg.num_keys + rng.integers(0, cfg.num_filler, size=(batch, length))
        values = np.full((batch, length), cfg.num_values + 1)      # filler: a filler word and no value
        needle_values = rng.integers(0, cfg.num_values, size=batch)
    else:
        keys = rng.integers(0, cfg.num_keys - 1, size=(batch, length))
        keys += keys >= needle_keys[:, None]      # distractor keys skip the needle's
        values = rng.integers(0, cfg.num_values, size=(batch, length))
    where = (rng.integers(0, length - 1, size=batch) if depth is None
             else np.full(batch, int(round(depth * (length - 2)))))
    rows = np.arange(batch)
    keys[rows, where] = needle_keys
    if cfg.haystack == "noise":
        values[rows, where] = needle_values
    keys[:, -1] = needle_keys
    values[:, -1] = cfg.num_values
    return torch.from_numpy(np.stack([keys, values], -1)), torch.from_numpy(values[rows, where])


class NIAHProbe(nn.Module):
    """Pair embedding -> bridge -> linear readout at the last position: ``pairs [B, L, 2] -> logits [B, values]``."""

    def __init__(self, bridge_name: str, cfg, bridge: BridgeConfig, backend: str = "auto"):
        super().__init__()
        # keys, then the filler words; values, then the query slot and the no-value slot
        self.keys = nn.Embedding(cfg.num_keys + cfg.num_filler, cfg.dim)
        self.values = nn.Embedding(cfg.num_values + 2, cfg.dim)
        self.bridge = Bridge(bridge_name, cfg.dim, cfg.dim, bridge, backend)
        self.readout = nn.Linear(cfg.dim, cfg.num_values)

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        features = self.keys(pairs[..., 0]) + self.values(pairs[..., 1])
        return self.readout(self.bridge(features)[:, -1])

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
            pairs, targets = niah_batch(rng, self.cfg, self.cfg.train.batch_size, self.length(step))
            out.append({"input_ids": pairs, "targets": targets, "attention_mask": torch.ones_like(pairs[..., 0])})
        return out


# Test sequences a forward holds: a cell's examples run in slices this size (a row of 8,192 tokens through a
# head_matrix state in one slice of 128 would take several GB).
EVAL_BATCH = 32


@torch.no_grad()
def evaluate_grid(model: NIAHProbe, cfg, seed: int) -> tuple[list[dict], list[dict]]:
    """Accuracy per (length, depth) cell (``cfg.cells()``) over ``test_examples`` sequences each, and every
    sequence's outcome (``length, depth, correct``). The same sequences for every bridge, so comparisons between
    bridges pair them; and at a length every depth reuses the same haystacks, needles and queries, the needle moved
    (the k-th item of each depth is one sequence; among distractors the needle keeps the value of the pair it
    replaces), so comparisons between depths pair them too."""
    model.eval()
    device = model_device(model)
    rows, items = [], []
    for length, depth in cfg.cells():
        rng = np.random.default_rng([seed, 2, length])
        pairs, targets = niah_batch(rng, cfg, cfg.test_examples, length, depth)
        correct = []
        for start in range(0, cfg.test_examples, EVAL_BATCH):
            logits = model(pairs[start:start + EVAL_BATCH].to(device))
            correct += (logits.argmax(-1).cpu() == targets[start:start + EVAL_BATCH]).tolist()
        rows.append({"length": length, "depth": depth, "accuracy": round(sum(correct) / len(correct), 4),
                     "n": len(correct)})
        items += [{"length": length, "depth": depth, "correct": int(c)} for c in correct]
    return rows, items
