"""Small files in the real data formats the paper config reads: a text corpus (JSON lines), LLaVA-format JSON
for both phases over an image folder, and the MME benchmark's release folders (one subtask of each layout)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .fake_hub import corpus


def _image(path: Path, rng: np.random.Generator, size: tuple[int, int]) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rng.integers(0, 256, (*size[::-1], 3), dtype=np.uint8)).save(path)


def write_corpus(path: Path, documents: int = 120) -> Path:
    lines = corpus()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": lines[i % len(lines)], "id": i}) + "\n" for i in range(documents)))
    return path


def write_llava(root: Path, images: int = 12) -> dict[str, str]:
    """``images/`` (PNG of mixed aspect ratios), ``align.json`` (one caption per image), ``instruct.json``
    (a two-turn conversation per image plus one text-only sample)."""
    rng = np.random.default_rng(0)
    names = [f"coco/{i:03d}.png" for i in range(images)]
    for i, name in enumerate(names):
        _image(root / "images" / name, rng, (40 + 8 * (i % 3), 32))
    align = [{"id": f"a{i}", "image": name, "conversations": [
        {"from": "human", "value": "<image>\nRender a clear and concise summary of the photo."},
        {"from": "gpt", "value": f"a red square on the left of the image {i}"}]} for i, name in enumerate(names)]
    instruct = [{"id": f"i{i}", "image": name, "conversations": [
        {"from": "human", "value": "<image>\nIs there a red square in the image?"}, {"from": "gpt", "value": "Yes"},
        {"from": "human", "value": "How many shapes are there?"}, {"from": "gpt", "value": "one"}]}
        for i, name in enumerate(names)]
    instruct.append({"id": "text-only", "conversations": [{"from": "human", "value": "What is 2 + 2?"},
                                                          {"from": "gpt", "value": "4"}]})
    (root / "align.json").write_text(json.dumps(align))
    (root / "instruct.json").write_text(json.dumps(instruct))
    return {"align_json": str(root / "align.json"), "instruct_json": str(root / "instruct.json"),
            "image_folder": str(root / "images")}


def write_mme(root: Path, per_task: int = 4) -> str:
    """``existence/`` (images beside their question files) and ``scene/`` (``images/`` and
    ``questions_answers_YN/``), ``per_task`` images each, two yes/no questions per image."""
    rng = np.random.default_rng(1)
    for task, split in (("existence", False), ("scene", True)):
        for i in range(per_task):
            image = root / task / ("images" if split else "") / f"{i:04d}.jpg"
            text = root / task / ("questions_answers_YN" if split else "") / f"{i:04d}.txt"
            _image(image, rng, (36, 36 + 4 * i))
            text.parent.mkdir(parents=True, exist_ok=True)
            text.write_text("Is there a red square in the image? Please answer yes or no.\tYes\n"
                            "Is there a blue circle in the image? Please answer yes or no.\tNo\n")
    return str(root)
