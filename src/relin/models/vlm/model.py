"""LLaVA's late fusion with a swappable bridge: the LLM reads ``inputs_embeds`` in which the N ``<image>``
positions of each row hold the bridge's outputs for that image's N patch features.

Saved as a directory: ``llm/`` (``save_pretrained``, safetensors), ``bridge.safetensors`` and ``bridge.json``
(the bridge's name, widths and options, and the image token id), plus the tokenizer at the top.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from ...errors import InputError
from ...layers.bridges import Bridge
from ..cache_api import cache_kwargs, output_cache


class BridgeVLM(nn.Module):
    """``forward(input_ids [B, T], attention_mask [B, T], features [B, N, d_vision])``: every row holds
    exactly N ``image_token_id`` positions."""

    def __init__(self, bridge: Bridge, llm, image_token_id: int):
        super().__init__()
        self.bridge, self.llm, self.image_token_id = bridge, llm, image_token_id

    def embed(self, input_ids: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """``[B, T, d_llm]``: token embeddings with the bridge's ``[B, N, d_llm]`` at the image positions."""
        is_image = input_ids == self.image_token_id
        embeds = self.llm.get_input_embeddings()(input_ids.masked_fill(is_image, 0))
        visual = self.bridge(features.to(embeds.dtype))
        if int(is_image.sum()) != visual.shape[0] * visual.shape[1]:
            raise InputError(f"batch holds {int(is_image.sum())} image tokens for {visual.shape[0]} images of "
                             f"{visual.shape[1]} patches: expected N image tokens per row")
        return embeds.masked_scatter(is_image[..., None], visual.to(embeds.dtype))

    def forward(self, input_ids, attention_mask, features, labels=None):
        positions = (attention_mask.long().cumsum(-1) - 1).clamp_min(0)
        return self.llm(inputs_embeds=self.embed(input_ids, features), attention_mask=attention_mask,
                        position_ids=positions)

    @torch.no_grad()
    def generate(self, input_ids, attention_mask, features, max_new_tokens: int, eos_token_id: int) -> list[list[int]]:
        """Greedy continuations of left-padded prompts (stopping at ``eos_token_id``)."""
        embeds = self.embed(input_ids, features)
        mask = attention_mask.clone()
        out = [[] for _ in range(input_ids.shape[0])]
        done = torch.zeros(input_ids.shape[0], dtype=torch.bool)
        past = None
        step_embeds = embeds
        for _ in range(max_new_tokens):
            positions = (mask.long().cumsum(-1) - 1).clamp_min(0)[:, -step_embeds.shape[1]:]
            result = self.llm(inputs_embeds=step_embeds, attention_mask=mask, position_ids=positions,
                              use_cache=True, **cache_kwargs(self.llm, past))
            past = output_cache(result)
            token = result.logits[:, -1].argmax(-1)
            for i, t in enumerate(token.tolist()):
                if not done[i]:
                    out[i].append(t)
            done |= token.cpu() == eos_token_id
            if bool(done.all()):
                break
            step_embeds = self.llm.get_input_embeddings()(token)[:, None]
            mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], 1)
        return out

    def save_pretrained(self, directory: str | Path, safe_serialization: bool = True) -> None:
        from safetensors.torch import save_file

        directory = Path(directory)
        self.llm.save_pretrained(directory / "llm", safe_serialization=True)
        save_file({k: v.contiguous() for k, v in self.bridge.state_dict().items()}, directory / "bridge.safetensors")
        (directory / "bridge.json").write_text(json.dumps({**self.bridge.spec(), "image_token_id": self.image_token_id},
                                                          indent=1, sort_keys=True))

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> "BridgeVLM":
        from safetensors.torch import load_file

        from ..teachers import load_pretrained

        directory = Path(directory)
        if not (directory / "bridge.json").is_file() or not (directory / "bridge.safetensors").is_file():
            raise InputError(f"VLM {directory}: missing bridge.json or bridge.safetensors (expected a directory "
                             f"written by relin lia-mtr-bridge-align or lia-mtr-bridge-instruct)")
        spec = json.loads((directory / "bridge.json").read_text())
        bridge = Bridge.from_spec(spec)
        bridge.load_state_dict(load_file(directory / "bridge.safetensors"))
        return cls(bridge, load_pretrained(str(directory / "llm")), spec["image_token_id"])
