"""The CLIP vision tower: a tiny ``CLIPModel`` built from a transformers config (trained contrastively in the
DAG), or a checkpoint loaded as ``CLIPVisionModel`` (openai/clip-vit-large-patch14 in the paper config) or as
``Dinov2Model`` (the pretrained overlay's stand-in, a ``checkpoints`` row: same grid-feature interface, no text
alignment), and LLaVA's features: the penultimate layer's patch tokens, CLS dropped (``clip_encoder.py``: ``[:, 1:]``).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import InputError

if TYPE_CHECKING:
    import torch

# CLIP's normalisation (transformers OPENAI_CLIP_MEAN / OPENAI_CLIP_STD).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def build_clip(cfg, image_size: int, tokenizer, seed: int = 0):
    """A fresh ``CLIPModel`` (fp32) from :class:`~relin.config.lia_mtr.TowerConfig`; its text tower reads
    captions in ``tokenizer``'s ids and pools at the eos token."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    shared = dict(hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
                  num_attention_heads=cfg.num_attention_heads, intermediate_size=cfg.intermediate_size,
                  projection_dim=cfg.projection_dim)
    config = CLIPConfig(
        text_config={**shared, "vocab_size": len(tokenizer), "max_position_embeddings": 64,
                     "pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
                     "eos_token_id": tokenizer.eos_token_id},
        vision_config={**shared, "image_size": image_size, "patch_size": cfg.patch_size},
        projection_dim=cfg.projection_dim)
    torch.manual_seed(seed)
    return CLIPModel(config)


def load_vision_tower(reference: str | Path):
    """``CLIPVisionModel`` from a local ``CLIPModel`` or ``CLIPVisionModel`` directory, or ``Dinov2Model`` from a
    DINOv2 one, or a hub id in the local cache (offline, safetensors, no repository code)."""
    import json

    from transformers import CLIPVisionModel, Dinov2Model

    from ...hub import resolve

    path = resolve(str(reference), "vision tower")
    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type")
        cls = Dinov2Model if model_type == "dinov2" else CLIPVisionModel
        return cls.from_pretrained(str(path), local_files_only=True, use_safetensors=True, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - safetensors, json and OS errors all mean a damaged checkpoint
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise InputError(f"vision tower {reference}: could not load ({first})") from None


def load_image_processor(reference: str | Path):
    """The checkpoint's own ``CLIPImageProcessor`` (its ``preprocessor_config.json``: resize, centre crop, its
    mean and std), or None for a tower trained in the DAG (whose pixels :func:`pixel_values` prepares)."""
    from transformers import CLIPImageProcessor

    from ...hub import resolve

    path = resolve(str(reference), "vision tower")
    if not (path / "preprocessor_config.json").is_file():
        return None
    try:
        return CLIPImageProcessor.from_pretrained(str(path), local_files_only=True)
    except Exception as err:  # noqa: BLE001 - json and OS errors all mean a damaged file
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise InputError(f"vision tower {reference}: preprocessor_config.json unreadable ({first})") from None


def pixel_values(images: "torch.Tensor", size: int) -> "torch.Tensor":
    """uint8 images ``[N, H, W, 3]`` -> CLIP inputs ``[N, 3, size, size]`` (bicubic resize when H != size)."""
    import torch
    import torch.nn.functional as F

    x = images.permute(0, 3, 1, 2).float() / 255.0
    if x.shape[-1] != size:
        x = F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False).clamp(0, 1)
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in (CLIP_MEAN, CLIP_STD))
    return (x - mean) / std


def patch_features(vision, images: "torch.Tensor", select_layer: int = -2, batch_size: int = 64,
                   progress: bool = True, processor=None) -> "torch.Tensor":
    """Features ``[N, P, d_vision]`` (fp32) of uint8 images ``[N, H, W, 3]``: hidden state ``select_layer``
    of the vision transformer without its CLS token, computed on the tower's device. ``processor`` (a
    checkpoint's ``CLIPImageProcessor``) prepares the pixels when given, else :func:`pixel_values`."""

    import torch

    from ...devices import model_device
    from ...logs import progress as bar

    vision.eval()
    device = model_device(vision)
    size = vision.config.image_size
    out = []
    with torch.no_grad():
        for lo in bar(range(0, len(images), batch_size), desc="features", disable=not progress):
            chunk = images[lo:lo + batch_size]
            pixels = (pixel_values(chunk, size) if processor is None else
                      processor(images=list(chunk.numpy()), return_tensors="pt")["pixel_values"]).to(device)
            hidden = vision(pixel_values=pixels, output_hidden_states=True).hidden_states
            out.append(hidden[select_layer][:, 1:].float().cpu())
    return torch.cat(out)
