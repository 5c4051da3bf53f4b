"""The hybrid causal LM: a Qwen3- or GPT-NeoX-architecture decoder whose layers mix tokens by attention,
sliding-window attention, Gated DeltaNet, Hedgehog linear attention or the HedgeMamba block
(:class:`~.configuration.HybridConfig`), as a Hugging Face model (``save_pretrained`` /
``from_pretrained`` / ``generate``). No distributed code lives here.

Its cache (:class:`~.cache.HybridCache`) holds, per layer, the keys and values of attention layers and the
fixed-size conv and recurrent states of the linear layers; decoding one token costs a linear layer
the same whatever the context. ``generate`` is the model's own loop (greedy or sampled with
temperature and top-p) over that cache; it accepts the ``generate`` arguments a causal LM is
usually called with (``input_ids``, ``attention_mask``, ``max_new_tokens``/``max_length``,
``do_sample``, ``temperature``, ``top_p``, ``eos_token_id``, ``pad_token_id``).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.utils import ModelOutput

from ...artifacts import IGNORE_INDEX, next_token_pairs
from ...layers.attention import Attention, static_attention_mask
from ...layers.attention import attention_mask as build_attention_mask
from ...layers.gated_deltanet import GatedDeltaNet
from ...layers.hedgehog import HedgehogAttention, HedgehogFeatureMap
from ...layers.hedgemamba import HedgeMamba
from ...layers.mlp import DenseMLP, GatedMLP
from ...layers.norms import RMSNorm
from ...layers.rotary import RotaryEmbedding
from ...layers.short_conv import ShortConvolution
from ..generation import sample
from .cache import SOFTMAX_MIXERS, HybridCache, StaticHybridCache
from .configuration import HybridConfig


@dataclass
class HybridModelOutput(ModelOutput):
    last_hidden_state: torch.Tensor | None = None
    cache: HybridCache | None = None


@dataclass
class HybridCausalLMOutput(ModelOutput):
    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    cache: HybridCache | None = None


# Attribute name of each mixer type in a decoder layer (the teacher's name where weights copy in).
MIXER_NAMES = {"attention": "self_attn", "swa": "self_attn", "gdn": "linear_attn", "hedgehog": "linear_attn",
               "hedgemamba": "mamba"}


def build_mixer(config: HybridConfig, kind: str) -> nn.Module:
    """The token mixer of one layer, by :data:`~.configuration.MIXER_TYPES` name."""
    neox = config.block == "gpt_neox"
    attention = dict(width=config.hidden_size, num_heads=config.num_attention_heads,
                     num_kv_heads=config.num_key_value_heads, head_dim=config.head_dim, eps=config.rms_norm_eps,
                     qk_norm=config.qk_norm, bias=neox, out_bias=neox, backend=config.kernel_backend)
    heads = (config.hidden_size, config.num_attention_heads, config.head_dim)
    if kind == "hedgehog":
        return HedgehogAttention(*heads, config.layer("hedgehog"), bias=neox, backend=config.kernel_backend)
    if kind == "hedgemamba":
        return HedgeMamba(*heads, config.layer("hedgemamba"), feature_map=config.layer("hedgehog").feature_map,
                          bias=neox, backend=config.kernel_backend)
    if kind == "attention":
        return Attention(**attention)
    if kind == "swa":
        swa = config.layer("swa")
        return Attention(**attention, window=swa.window, sinks=swa.sinks)
    if kind == "gdn":
        return GatedDeltaNet(*heads, config.layer("gdn"), eps=config.rms_norm_eps, backend=config.kernel_backend)
    raise ValueError(f"mixer type {kind!r}: expected one of {', '.join(MIXER_NAMES)}")


class HybridDecoderLayer(nn.Module):
    """Pre-norm block: ``x + mixer(norm(x))``, then ``x + mlp(norm(x))``; with the GPT-NeoX block and
    ``use_parallel_residual``, ``x + mixer(ln₁ x) + mlp(ln₂ x)``. Mixers are named by
    :data:`MIXER_NAMES` (``self_attn`` is Qwen3's name, so a teacher layer copies in)."""

    def __init__(self, config: HybridConfig, index: int):
        super().__init__()
        self.kind = config.mixer_types[index]
        mixer = build_mixer(config, self.kind)
        self.mixer_name = MIXER_NAMES[self.kind]
        setattr(self, self.mixer_name, mixer)
        self.parallel = config.block == "gpt_neox" and config.use_parallel_residual
        if config.block == "gpt_neox":
            self.mlp = DenseMLP(config.hidden_size, config.intermediate_size, config.hidden_act)
            self.input_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
            self.post_attention_layernorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        else:
            self.mlp = GatedMLP(config.hidden_size, config.intermediate_size)
            self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
            self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(self, hidden_states, rope, masks, padding, state=None, use_cache=False):
        mixer = getattr(self, self.mixer_name)
        normed = self.input_layernorm(hidden_states)
        if self.kind in SOFTMAX_MIXERS:
            mixed, state = mixer(normed, rope, masks.get((mixer.window, mixer.sinks)), state, use_cache)
        elif self.kind == "hedgehog":
            mixed, state = mixer(normed, rope, padding, state, use_cache)
        else:
            mixed, state = mixer(normed, padding, state, use_cache)
        if self.parallel:
            return hidden_states + mixed + self.mlp(self.post_attention_layernorm(hidden_states)), state
        if isinstance(self.post_attention_layernorm, RMSNorm):
            normed, hidden_states = self.post_attention_layernorm.add_and_norm(mixed, hidden_states)
        else:
            hidden_states = hidden_states + mixed
            normed = self.post_attention_layernorm(hidden_states)
        return hidden_states + self.mlp(normed), state


class HybridPreTrainedModel(PreTrainedModel):
    config_class = HybridConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["HybridDecoderLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            module.weight.normal_(0.0, std)
            if module.bias is not None:
                module.bias.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.normal_(0.0, std)
        elif isinstance(module, RMSNorm):
            module.weight.fill_(1.0)
        elif isinstance(module, nn.LayerNorm):
            module.weight.fill_(1.0)
            module.bias.zero_()
        elif isinstance(module, HedgehogFeatureMap):
            module.reset_parameters()
        elif isinstance(module, HedgeMamba):
            module.reset_ssm()
        elif isinstance(module, ShortConvolution):
            module.weight.zero_()
            module.weight[:, -1] = 1.0
        elif isinstance(module, GatedDeltaNet):
            module.reset_decay()


class HybridModel(HybridPreTrainedModel):
    """Embeddings, the decoder layers and the final norm; returns the last hidden state ``[B, T, C]``."""

    def __init__(self, config: HybridConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList(HybridDecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = (nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps) if config.block == "gpt_neox"
                     else RMSNorm(config.hidden_size, config.rms_norm_eps))
        self.rotary = RotaryEmbedding(int(config.head_dim * config.rotary_pct), config.rope_theta)
        # Set by gradient_checkpointing_enable(): each layer's activations are recomputed in the backward pass.
        self.gradient_checkpointing = False
        self.post_init()

    def get_input_embeddings(self):
        return self.embed_tokens

    def set_input_embeddings(self, value):
        self.embed_tokens = value

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.LongTensor | None = None, cache: HybridCache | None = None,
                use_cache: bool = False, inputs_embeds: torch.Tensor | None = None, **kwargs) -> HybridModelOutput:
        """``attention_mask [B, T_past + T]`` (1 = real token; left or right padding). Positions count
        real tokens unless ``position_ids [B, T]`` are given. With a :class:`StaticHybridCache` the
        rows are unpadded (no ``attention_mask``), positions run from ``cache.length``, and the cache
        is updated in place and returned."""
        hidden = self.embed_tokens(input_ids) if inputs_embeds is None else inputs_embeds
        if isinstance(cache, StaticHybridCache):
            return self._forward_static(hidden, cache, attention_mask, position_ids)
        batch, steps = hidden.shape[:2]
        past = cache.seen if cache is not None else 0
        if attention_mask is None:
            attention_mask = torch.ones(batch, past + steps, dtype=torch.long, device=hidden.device)
        if position_ids is None:
            position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -steps:]
        rope = self.rotary(position_ids, hidden.dtype)
        windows = {(layer.self_attn.window, layer.self_attn.sinks) for layer in self.layers
                   if layer.kind in SOFTMAX_MIXERS}
        masks = {key: build_attention_mask(attention_mask, steps, *key) for key in windows}
        states = cache.states if cache is not None else [None] * len(self.layers)
        new_states = []
        recompute = self.gradient_checkpointing and self.training and torch.is_grad_enabled() and not use_cache
        for layer, state in zip(self.layers, states):
            if recompute:
                hidden, state = self._gradient_checkpointing_func(layer.__call__, hidden, rope, masks, attention_mask)
            else:
                hidden, state = layer(hidden, rope, masks, attention_mask, state, use_cache)
            new_states.append(state)
        new_cache = HybridCache(new_states, past + steps) if use_cache else None
        return HybridModelOutput(last_hidden_state=self.norm(hidden), cache=new_cache)

    def _forward_static(self, hidden: torch.Tensor, cache: StaticHybridCache, attention_mask: torch.Tensor | None,
                        position_ids: torch.LongTensor | None) -> HybridModelOutput:
        """``hidden [B, T, C]`` through a static cache: no shape depends on ``cache.length`` and
        nothing reads it on the host, so a ``T = 1`` step can be captured in a CUDA graph."""
        if attention_mask is not None or position_ids is not None:
            raise ValueError("a StaticHybridCache takes neither attention_mask nor position_ids (positions run "
                             "from cache.length; mark left padding with cache.pad_left)")
        steps = hidden.shape[1]
        slots = cache.length + torch.arange(steps, device=hidden.device)
        real = slots[None] >= cache.start[:, None]                                 # [B, T]
        rope = self.rotary((slots[None] - cache.start[:, None]).clamp(min=0), hidden.dtype)
        windows = {(layer.self_attn.window, layer.self_attn.sinks) for layer in self.layers
                   if layer.kind in SOFTMAX_MIXERS and not layer.self_attn.decodes_without_mask(steps)}
        masks = {key: static_attention_mask(cache.length, steps, cache.max_length, *key, start=cache.start)
                 for key in windows}
        for layer, state in zip(self.layers, cache.states):
            hidden, _ = layer(hidden, rope, masks, real, state, use_cache=True)
        cache.length.add_(steps)
        return HybridModelOutput(last_hidden_state=self.norm(hidden), cache=cache)


class HybridForCausalLM(HybridPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: HybridConfig):
        super().__init__(config)
        self.model = HybridModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.LongTensor | None = None, cache: HybridCache | StaticHybridCache | None = None,
                use_cache: bool = False, labels: torch.LongTensor | None = None, logits_to_keep: int = 0,
                inputs_embeds: torch.Tensor | None = None, **kwargs) -> HybridCausalLMOutput:
        """Logits ``[B, T, vocab]`` (the last ``logits_to_keep`` positions when > 0); with ``labels``
        (``-100`` = no target) also the mean next-token cross-entropy."""
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         cache=cache, use_cache=use_cache, inputs_embeds=inputs_embeds)
        hidden = out.last_hidden_state
        logits = self.lm_head(hidden[:, -logits_to_keep:] if logits_to_keep else hidden)
        loss = None
        if labels is not None:
            shifted, targets = next_token_pairs(logits.float(), labels)
            loss = F.cross_entropy(shifted.reshape(-1, shifted.shape[-1]), targets.reshape(-1),
                                   ignore_index=IGNORE_INDEX)
        return HybridCausalLMOutput(loss=loss, logits=logits, cache=out.cache)

    @torch.no_grad()
    def generate(self, input_ids: torch.LongTensor, attention_mask: torch.Tensor | None = None,
                 max_new_tokens: int | None = None, max_length: int | None = None, do_sample: bool = False,
                 temperature: float = 1.0, top_p: float = 1.0, eos_token_id: int | None = None,
                 pad_token_id: int | None = None, generator: torch.Generator | None = None,
                 **unused) -> torch.LongTensor:
        """Prompts ``[B, T]`` (left-padded) followed by up to ``max_new_tokens`` tokens each, ``[B, T + N]``;
        rows that produced ``eos_token_id`` continue with ``pad_token_id``."""
        if max_new_tokens is None:
            max_new_tokens = (max_length or self.config.max_position_embeddings) - input_ids.shape[1]
        eos = self.config.eos_token_id if eos_token_id is None else eos_token_id
        pad = self.config.pad_token_id if pad_token_id is None else pad_token_id
        new = sample(self, input_ids, max_new_tokens, attention_mask=attention_mask, eos_token_id=eos,
                     pad_token_id=pad, temperature=temperature if do_sample else 0.0, top_p=top_p,
                     generator=generator)
        return torch.cat([input_ids, new], dim=1)
