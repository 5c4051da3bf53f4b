"""Real LIA-MTR data (``lia_mtr.source: llava``) in the ``synth_vision`` artifact's layout, so that every
later stage reads it unchanged.

Phase 1 takes each LLaVA pretraining sample's answer as its caption; phase 2 takes the conversations of the
samples with an image (text-only samples of the mix are skipped: the bridge sees none of them). Both phases
share one image table (``train.images``; ``train.align_images`` / ``train.instruct_images`` index it per row).
MME comes from its release folders, two questions per image. Images are padded to a square with the CLIP
mean colour (LLaVA-1.5's ``image_aspect_ratio: pad``) and resized to ``image_size``, stored as uint8.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...config.lia_mtr import LlavaDataConfig
from ...errors import InputError
from .loaders import Conversation, load_llava_json, load_mme_release

CLIP_MEAN_RGB = (122, 116, 104)


def square_image(path: Path, size: int) -> np.ndarray:
    """``[size, size, 3]`` uint8: the image padded to a square (centred on the CLIP mean) and resized."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as img:
            img = img.convert("RGB")
    except FileNotFoundError:
        raise InputError(f"image {path}: not found") from None
    except (UnidentifiedImageError, OSError) as err:
        raise InputError(f"image {path}: unreadable ({err})") from None
    side = max(img.size)
    canvas = Image.new("RGB", (side, side), CLIP_MEAN_RGB)
    canvas.paste(img, ((side - img.width) // 2, (side - img.height) // 2))
    return np.asarray(canvas.resize((size, size), Image.Resampling.BICUBIC), dtype=np.uint8)


def _take(samples: list[Conversation], limit: int) -> list[Conversation]:
    with_image = [s for s in samples if s.image]
    return with_image[:limit] if limit else with_image


def import_llava(cfg: LlavaDataConfig) -> dict:
    """``{"train": {"images", "captions", "align_images", "conversations", "instruct_images", "scenes"},
    "mme": {"images", "scenes", "questions"}}`` as :func:`relin.data.vision.synth.generate` returns."""
    from ...logs import progress

    folder = Path(cfg.image_folder)
    align, instruct = _take(load_llava_json(cfg.align_json), cfg.max_align), \
        _take(load_llava_json(cfg.instruct_json), cfg.max_instruct)
    if not align or not instruct:
        raise InputError(f"{cfg.align_json if not align else cfg.instruct_json}: no sample with an image")
    for sample in align:
        if sample.turns[-1][0] != "assistant":
            raise InputError(f"{cfg.align_json}: sample {sample.id}: expected an answer (the caption) last")
    table: dict[str, int] = {}
    for sample in (*align, *instruct):
        table.setdefault(sample.image, len(table))
    images = np.stack([square_image(folder / name, cfg.image_size)
                       for name in progress(table, desc="images", mininterval=5)])
    conversations = [[{"role": role, "content": text} for role, text in s.turns] for s in instruct]
    train = {"images": images, "scenes": list(table), "captions": [s.turns[-1][1] for s in align],
             "align_images": [table[s.image] for s in align], "conversations": conversations,
             "instruct_images": [table[s.image] for s in instruct]}
    root = Path(cfg.mme_folder)
    questions = load_mme_release(root)
    names = list(dict.fromkeys(q.image for q in questions))
    index = {name: i for i, name in enumerate(names)}
    mme_images = np.stack([square_image(root / name, cfg.image_size)
                           for name in progress(names, desc="MME images", mininterval=5)])
    mme = {"images": mme_images, "scenes": names,
           "questions": [{"task": q.task, "image": q.image, "index": index[q.image], "question": q.question,
                          "answer": q.answer} for q in questions]}
    return {"train": train, "mme": mme}
