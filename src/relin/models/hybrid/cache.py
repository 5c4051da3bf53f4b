"""The hybrid's decoding caches: :class:`HybridCache`, grown by each forward, and :class:`StaticHybridCache`,
preallocated at fixed addresses for CUDA-graph decoding (:class:`~relin.models.static_sampler.StaticSampler`)."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from ...layers.attention import AttentionState, StaticAttentionState
from ...layers.gated_deltanet import StaticDeltaNetState

# Mixers that attend with softmax over the keys and values they keep (the others hold a fixed-size state).
SOFTMAX_MIXERS = ("attention", "swa")


@dataclass
class HybridCache:
    """Per-layer decoding states (``AttentionState`` or ``DeltaNetState``) and the tokens seen."""

    states: list = field(default_factory=list)
    seen: int = 0

    def nbytes(self) -> dict[str, int]:
        """Bytes held by attention KV and by recurrent (conv + linear-attention) states."""
        kv = sum(s.nbytes() for s in self.states if isinstance(s, AttentionState))
        return {"kv": kv, "recurrent": sum(s.nbytes() for s in self.states if s is not None) - kv}


# Mixer types a static cache can hold (the others raise in ``StaticHybridCache.allocate``).
STATIC_MIXERS = ("attention", "swa", "gdn")


@dataclass
class StaticHybridCache:
    """A fixed-address cache for decoding with fixed shapes (CUDA-graph capture and replay): per
    attention/SWA layer a :class:`StaticAttentionState` with keys and values ``[B, H_kv, T_max, D]``
    preallocated, per Gated DeltaNet layer a :class:`StaticDeltaNetState` (the conv inputs of q, k and v in one
    ``[B, 3·H·K, conv-1]``, recurrent ``S [B, H, K, V]`` in float32), all written in place, and ``length``, the
    tokens seen, as a 0-d int64 device tensor that the model advances after each forward.

    Rows may be left-padded: ``start [B]`` (int64, on the device) holds each row's first real slot, set
    by :meth:`pad_left` before the prefill; positions count real tokens and padded slots are never
    attended nor folded into a recurrent state (the model refuses an ``attention_mask`` with this
    cache). Build one with :meth:`allocate`, prefill it with any number of forwards of ``[B, T]``
    tokens, then decode ``[B, 1]``; :meth:`reset` empties it for reuse.
    """

    states: list = field(default_factory=list)
    length: torch.Tensor | None = None
    max_length: int = 0
    start: torch.Tensor | None = None

    @classmethod
    def allocate(cls, model: nn.Module, batch: int, max_length: int, device: torch.device | str | None = None,
                 dtype: torch.dtype | None = None) -> StaticHybridCache:
        """Zeroed buffers for ``batch`` rows of up to ``max_length`` tokens, on the model's device and in
        its dtype unless given. ``model``: a :class:`~.modeling.HybridForCausalLM` or
        :class:`~.modeling.HybridModel`."""
        config = model.config
        unsupported = sorted(set(config.mixer_types) - set(STATIC_MIXERS))
        if unsupported:
            raise NotImplementedError(f"StaticHybridCache: mixer types {unsupported} have no static decode path "
                                      f"(supported: {', '.join(STATIC_MIXERS)})")
        weight = model.get_input_embeddings().weight
        device = weight.device if device is None else torch.device(device)
        dtype = weight.dtype if dtype is None else dtype
        length = torch.zeros((), dtype=torch.long, device=device)
        start = torch.zeros(batch, dtype=torch.long, device=device)
        states = []
        for kind in config.mixer_types:
            if kind in SOFTMAX_MIXERS:
                shape = (batch, config.num_key_value_heads, max_length, config.head_dim)
                states.append(StaticAttentionState(torch.zeros(shape, dtype=dtype, device=device),
                                                   torch.zeros(shape, dtype=dtype, device=device), length, start))
            else:
                inner = config.num_attention_heads * config.head_dim
                conv = torch.zeros(batch, 3 * inner, config.layer("gdn").conv_size - 1, dtype=dtype, device=device)
                recurrent = torch.zeros(batch, config.num_attention_heads, config.head_dim, config.head_dim,
                                        dtype=torch.float32, device=device)
                states.append(StaticDeltaNetState(conv, recurrent))
        return cls(states, length, max_length, start)

    def pad_left(self, attention_mask: torch.Tensor) -> None:
        """Mark the left padding of the prompts about to be prefilled: ``attention_mask [B, T]`` (1 = real
        token, zeros only before a row's tokens). Call on an empty cache."""
        if attention_mask.shape[0] != self.start.shape[0]:
            raise ValueError(f"attention_mask: expected {self.start.shape[0]} rows, got {attention_mask.shape[0]}")
        self.start.copy_(attention_mask.shape[1] - attention_mask.long().sum(-1))

    def reset(self) -> None:
        """Zero every buffer, the length and the padding, in place (addresses kept, so captured graphs stay
        valid)."""
        self.length.zero_()
        self.start.zero_()
        for state in self.states:
            for tensor in vars(state).values():
                if isinstance(tensor, torch.Tensor) and tensor is not self.length and tensor is not self.start:
                    tensor.zero_()

    def nbytes(self) -> dict[str, int]:
        """Bytes allocated for attention KV (at ``max_length``) and for recurrent (conv + S) states."""
        return HybridCache(self.states).nbytes()
