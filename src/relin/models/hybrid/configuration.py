"""The hybrid model's Hugging Face config: a teacher's transformer with a mixer type per layer."""
from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from ...config.hedgemamba import HedgehogLayerConfig, MambaBlockConfig
from ...config.loader import as_dict, build
from ...config.opal import GDNConfig, SWAConfig
from ...errors import ConfigError, InputError

# Mixer types a layer may have (each also in the modeling's ``build_mixer``).
MIXER_TYPES = ("attention", "swa", "gdn", "hedgehog", "hedgemamba")
# The blocks around the mixers: Qwen3's (OPAL's teacher), GPT-NeoX's (HedgeMamba's Pythia teacher), or Llama's (a
# pretrained checkpoint such as SmolLM2: Qwen3's block without the q/k norms).
BLOCKS = ("qwen3", "gpt_neox", "llama")
# Each mixer's options, a section of the config typed by the params.yaml section it comes from.
LAYER_OPTIONS: dict[str, type] = {"swa": SWAConfig, "gdn": GDNConfig, "hedgehog": HedgehogLayerConfig,
                                  "hedgemamba": MambaBlockConfig}


class HybridConfig(PretrainedConfig):
    """A teacher's decoder whose layer i mixes tokens with ``mixer_types[i]``:

    - ``attention``: the teacher's softmax attention;
    - ``swa``: the same attention over a window plus sink tokens (``swa``: :class:`SWAConfig`);
    - ``gdn``: Gated DeltaNet (``gdn``: :class:`GDNConfig`) with every query head a k/v head;
    - ``hedgehog``: Hedgehog linear attention (``hedgehog``: :class:`HedgehogLayerConfig`) with the attention's
      projections;
    - ``hedgemamba``: the HedgeMamba block (``hedgemamba``: :class:`MambaBlockConfig`; its φ is the
      ``hedgehog`` section's ``feature_map``).

    Each mixer section is stored as a plain dict (the config stays JSON) and checked through its dataclass on
    construction: an unknown or mistyped key is a :class:`~relin.errors.ConfigError` naming it, as is a flat
    ``<mixer>_<option>`` keyword (options live in their section). :meth:`layer` returns a section typed.

    ``block`` picks what surrounds the mixers: ``qwen3`` (RMSNorm, q/k-normed GQA attention, gated MLP,
    sequential residual), ``llama`` (the same without the q/k norms) or ``gpt_neox`` (LayerNorm, biased attention
    with ``rotary_pct`` of each head rotated, GELU MLP, and the parallel residual ``x + mixer(ln₁ x) + mlp(ln₂ x)``
    when ``use_parallel_residual``).
    """

    model_type = "relin_hybrid"

    def __init__(self, vocab_size: int = 256, hidden_size: int = 128, intermediate_size: int = 384,
                 num_hidden_layers: int = 4, num_attention_heads: int = 4, num_key_value_heads: int = 4,
                 head_dim: int = 32, rms_norm_eps: float = 1e-6, rope_theta: float = 10000.0,
                 max_position_embeddings: int = 1024, initializer_range: float = 0.02,
                 tie_word_embeddings: bool = True, mixer_types: list[str] | None = None,
                 swa: dict | None = None, gdn: dict | None = None, hedgehog: dict | None = None,
                 hedgemamba: dict | None = None, kernel_backend: str = "auto",
                 block: str = "qwen3", rotary_pct: float = 1.0, layer_norm_eps: float = 1e-5,
                 use_parallel_residual: bool = True, hidden_act: str = "gelu", pad_token_id: int | None = None,
                 bos_token_id: int | None = None, eos_token_id: int | None = None, **kwargs):
        flat = sorted(key for key in kwargs if key.split("_", 1)[0] in LAYER_OPTIONS)
        if flat:
            raise ConfigError(f"hybrid config: {', '.join(flat)}: expected the options inside their section "
                              f"({', '.join(LAYER_OPTIONS)}), e.g. gdn={{'conv_size': 4}}")
        self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_key_value_heads, self.head_dim = num_key_value_heads, head_dim
        self.rms_norm_eps, self.rope_theta = rms_norm_eps, rope_theta
        self.max_position_embeddings, self.initializer_range = max_position_embeddings, initializer_range
        self.mixer_types = list(mixer_types) if mixer_types is not None else ["attention"] * num_hidden_layers
        for name, section in (("swa", swa), ("gdn", gdn), ("hedgehog", hedgehog), ("hedgemamba", hedgemamba)):
            setattr(self, name, as_dict(build(LAYER_OPTIONS[name], dict(section or {}), f"hybrid config {name}")))
        self.kernel_backend = kernel_backend
        # transformers 5 no longer gives every config these: set here, a config built without them still loads.
        self.pad_token_id, self.bos_token_id, self.eos_token_id = pad_token_id, bos_token_id, eos_token_id
        self.block, self.rotary_pct, self.layer_norm_eps = block, rotary_pct, layer_norm_eps
        self.use_parallel_residual, self.hidden_act = use_parallel_residual, hidden_act
        if block not in BLOCKS:
            raise ValueError(f"block: expected one of {', '.join(BLOCKS)}, got {block!r}")
        unknown = sorted(set(self.mixer_types) - set(MIXER_TYPES))
        if unknown or len(self.mixer_types) != num_hidden_layers:
            raise ValueError(f"mixer_types: expected {num_hidden_layers} of {', '.join(MIXER_TYPES)}, "
                             f"got {self.mixer_types}")
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)

    def layer(self, kind: str) -> Any:
        """The options of mixer ``kind`` as their config dataclass (:data:`LAYER_OPTIONS`)."""
        return build(LAYER_OPTIONS[kind], dict(getattr(self, kind)), f"hybrid config {kind}")

    @property
    def qk_norm(self) -> bool:
        """Whether the block's attention normalises q and k per head before RoPE (Qwen3's does, Llama's and
        GPT-NeoX's do not)."""
        return self.block == "qwen3"

    @classmethod
    def from_teacher(cls, teacher_config, mixer_types: list[str], *, kernel_backend: str = "auto",
                     **sections: Any) -> "HybridConfig":
        """The hybrid of a ``Qwen3``, ``Llama`` or ``GPTNeoX`` teacher config with ``mixer_types`` per layer;
        ``sections`` are mixer options (:data:`LAYER_OPTIONS` dataclasses or dicts)."""
        common = dict(vocab_size=teacher_config.vocab_size, hidden_size=teacher_config.hidden_size,
                      intermediate_size=teacher_config.intermediate_size,
                      num_hidden_layers=teacher_config.num_hidden_layers,
                      max_position_embeddings=teacher_config.max_position_embeddings,
                      initializer_range=teacher_config.initializer_range,
                      tie_word_embeddings=teacher_config.tie_word_embeddings, mixer_types=mixer_types,
                      pad_token_id=teacher_config.pad_token_id, bos_token_id=teacher_config.bos_token_id,
                      eos_token_id=teacher_config.eos_token_id, kernel_backend=kernel_backend,
                      **{k: as_dict(v) for k, v in sections.items()})
        rope = getattr(teacher_config, "rope_parameters", None) or {}
        model_type = teacher_config.model_type
        if model_type in ("qwen3", "llama"):
            if model_type == "llama":
                _check_llama(teacher_config, rope)
            heads = teacher_config.num_attention_heads
            return cls(**common, num_attention_heads=heads, num_key_value_heads=teacher_config.num_key_value_heads,
                       head_dim=getattr(teacher_config, "head_dim", None) or teacher_config.hidden_size // heads,
                       rms_norm_eps=teacher_config.rms_norm_eps, block=model_type,
                       rope_theta=float(rope.get("rope_theta", getattr(teacher_config, "rope_theta", 10000.0))))
        if model_type == "gpt_neox":
            heads = teacher_config.num_attention_heads
            return cls(**common, num_attention_heads=heads, num_key_value_heads=heads,
                       head_dim=teacher_config.hidden_size // heads,
                       rope_theta=float(rope.get("rope_theta", getattr(teacher_config, "rotary_emb_base", 10000.0))),
                       rotary_pct=float(rope.get("partial_rotary_factor", getattr(teacher_config, "rotary_pct", 1.0))),
                       block="gpt_neox", layer_norm_eps=teacher_config.layer_norm_eps,
                       use_parallel_residual=teacher_config.use_parallel_residual, hidden_act=teacher_config.hidden_act)
        raise InputError(f"teacher model type {model_type!r}: expected qwen3 or llama (OPAL, HedgeMamba) or "
                         f"gpt_neox (HedgeMamba)")


def _check_llama(teacher_config, rope: dict) -> None:
    """A Llama checkpoint the llama block reproduces: no biases, a SiLU gated MLP, plain RoPE (one line otherwise)."""
    unsupported = [f"{key}={getattr(teacher_config, key)!r}" for key, plain in
                   (("attention_bias", False), ("mlp_bias", False), ("hidden_act", "silu"))
                   if getattr(teacher_config, key, plain) != plain]
    if rope.get("rope_type", "default") != "default":
        unsupported.append(f"rope_type={rope['rope_type']!r}")
    if unsupported:
        raise InputError(f"llama teacher: {', '.join(unsupported)} is not what the hybrid's llama block builds "
                         f"(expected no biases, hidden_act silu and default RoPE)")
