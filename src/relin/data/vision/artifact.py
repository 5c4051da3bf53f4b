"""The ``synth_vision`` artifact and the cached features, written by their stages and read by the others.

``synth_vision/``: ``images.safetensors`` (``train``, ``mme``: uint8 ``[N, H, W, 3]``), ``train.json``
(scenes, captions, conversations), ``mme.json`` (scenes, captions, questions with the index of their image),
``mme_questions/<subtask>.txt`` (the official ``img\\tquestion\\tgt`` layout), ``tokenizer/`` (the chat
tokenizer) and ``stats.json`` (counts, the text's phrasing). ``features/``: ``features.safetensors`` (``train``,
``mme``: fp32 ``[N, P, d_vision]``) and ``features.json`` (shapes, layer).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InputError


def write_synth_vision(tmp: Path, data: dict, tokenizer) -> dict:
    import torch
    from safetensors.torch import save_file

    from ...io import atomic_write_json

    save_file({split: torch.from_numpy(data[split]["images"]).contiguous() for split in ("train", "mme")},
              tmp / "images.safetensors")
    atomic_write_json(tmp / "train.json", {k: v for k, v in data["train"].items() if k != "images"})
    atomic_write_json(tmp / "mme.json", {k: v for k, v in data["mme"].items() if k != "images"})
    (tmp / "mme_questions").mkdir()
    by_task: dict[str, list[str]] = {}
    for q in data["mme"]["questions"]:
        by_task.setdefault(q["task"], []).append(f"{q['image']}\t{q['question']}\t{q['answer']}\n")
    for task, lines in by_task.items():
        (tmp / "mme_questions" / f"{task}.txt").write_text("".join(lines))
    tokenizer.save_pretrained(str(tmp / "tokenizer"))
    # the drawn scenes' phrasing (relin.data.vision.phrasing); LLaVA's real text has none
    stats = {"phrasing": data.get("phrasing"), "train_images": len(data["train"]["images"]),
             "mme_images": len(data["mme"]["scenes"]),
             "mme_questions": {task: len(lines) for task, lines in by_task.items()},
             "distinct_captions": len(set(data["train"]["captions"])), "vocab_size": len(tokenizer)}
    atomic_write_json(tmp / "stats.json", stats)
    return stats


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: not found (expected the output of relin lia-mtr-synth-vision)") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: damaged JSON ({err.msg}); regenerate it with relin lia-mtr-synth-vision") from None


def load_tensors(path: Path, what: str) -> dict:
    from safetensors.torch import load_file

    if not path.is_file():
        raise InputError(f"{path}: not found (expected the {what})")
    try:
        return load_file(str(path))
    except Exception as err:  # noqa: BLE001 - any safetensors failure means a damaged file
        raise InputError(f"{path}: unreadable ({(str(err).splitlines() or ['?'])[0]}); regenerate the {what}") from None


@dataclass
class VisionData:
    path: Path
    train: dict
    mme: dict

    @classmethod
    def load(cls, path: str | Path) -> "VisionData":
        path = Path(path)
        return cls(path, _read_json(path / "train.json"), _read_json(path / "mme.json"))

    @property
    def phrasing(self):
        """How the text is worded (:mod:`relin.data.vision.phrasing`), as ``stats.json`` records it."""
        from .phrasing import get_phrasing

        name = _read_json(self.path / "stats.json").get("phrasing")
        if name is None:
            raise InputError(f"{self.path / 'stats.json'}: no phrasing (expected drawn scenes' text from relin "
                             f"synth-vision; regenerate it)")
        return get_phrasing(name)

    def images(self) -> dict:
        return load_tensors(self.path / "images.safetensors", "lia-mtr-synth-vision images")

    def tokenizer(self):
        from ..tokenizer import load_tokenizer

        return load_tokenizer(self.path / "tokenizer")


def load_features(path: str | Path) -> dict:
    """``{"train": [N, P, d], "mme": [M, P, d]}`` fp32 features of relin lia-mtr-clip-features."""
    return load_tensors(Path(path) / "features.safetensors", "lia-mtr-clip-features output")
