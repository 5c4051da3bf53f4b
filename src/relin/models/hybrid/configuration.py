"""The hybrid model's Hugging Face config: a teacher's transformer with a mixer type per layer."""
from __future__ import annotations

from transformers import PretrainedConfig

# Mixer types a layer may have (each also in the modeling's ``build_mixer``).
MIXER_TYPES = ("attention", "swa", "gdn", "hedgehog", "hedgemamba")
# The blocks around the mixers: Qwen3's (OPAL's teacher) or GPT-NeoX's (HedgeMamba's Pythia teacher).
BLOCKS = ("qwen3", "gpt_neox")


class HybridConfig(PretrainedConfig):
    """A teacher's decoder whose layer i mixes tokens with ``mixer_types[i]``:

    - ``attention``: the teacher's softmax attention;
    - ``swa``: the same attention over a window of ``swa_window`` tokens plus ``swa_sinks`` sink tokens;
    - ``gdn``: Gated DeltaNet (``gdn_*`` options) with every query head a k/v head;
    - ``hedgehog``: Hedgehog linear attention (``hedgehog_*`` options) with the attention's projections;
    - ``hedgemamba``: the HedgeMamba block (``hedgemamba_*`` options; its φ is ``hedgehog_feature_map``).

    ``block`` picks what surrounds the mixers: ``qwen3`` (RMSNorm, q/k-normed GQA attention, gated MLP,
    sequential residual) or ``gpt_neox`` (LayerNorm, biased attention with ``rotary_pct`` of each head
    rotated, GELU MLP, and the parallel residual ``x + mixer(ln₁ x) + mlp(ln₂ x)`` when
    ``use_parallel_residual``).
    """

    model_type = "relin_hybrid"

    def __init__(self, vocab_size: int = 256, hidden_size: int = 128, intermediate_size: int = 384,
                 num_hidden_layers: int = 4, num_attention_heads: int = 4, num_key_value_heads: int = 4,
                 head_dim: int = 32, rms_norm_eps: float = 1e-6, rope_theta: float = 10000.0,
                 max_position_embeddings: int = 1024, initializer_range: float = 0.02,
                 tie_word_embeddings: bool = True, mixer_types: list[str] | None = None,
                 swa_window: int = 256, swa_sinks: int = 4, gdn_conv_size: int = 4, gdn_conv_activation: str = "silu",
                 gdn_qk_norm: bool = True, gdn_allow_neg_eigval: bool = False, kernel_backend: str = "auto",
                 block: str = "qwen3", rotary_pct: float = 1.0, layer_norm_eps: float = 1e-5,
                 use_parallel_residual: bool = True, hidden_act: str = "gelu", hedgehog_feature_map: str = "exp",
                 hedgehog_feature_position: str = "pre_rope", hedgemamba_conv_size: int = 4,
                 hedgemamba_conv_activation: str = "identity", **kwargs):
        self.vocab_size, self.hidden_size, self.intermediate_size = vocab_size, hidden_size, intermediate_size
        self.num_hidden_layers, self.num_attention_heads = num_hidden_layers, num_attention_heads
        self.num_key_value_heads, self.head_dim = num_key_value_heads, head_dim
        self.rms_norm_eps, self.rope_theta = rms_norm_eps, rope_theta
        self.max_position_embeddings, self.initializer_range = max_position_embeddings, initializer_range
        self.mixer_types = list(mixer_types) if mixer_types is not None else ["attention"] * num_hidden_layers
        self.swa_window, self.swa_sinks = swa_window, swa_sinks
        self.gdn_conv_size, self.gdn_conv_activation = gdn_conv_size, gdn_conv_activation
        self.gdn_qk_norm, self.gdn_allow_neg_eigval = gdn_qk_norm, gdn_allow_neg_eigval
        self.kernel_backend = kernel_backend
        self.block, self.rotary_pct, self.layer_norm_eps = block, rotary_pct, layer_norm_eps
        self.use_parallel_residual, self.hidden_act = use_parallel_residual, hidden_act
        self.hedgehog_feature_map, self.hedgehog_feature_position = hedgehog_feature_map, hedgehog_feature_position
        self.hedgemamba_conv_size, self.hedgemamba_conv_activation = hedgemamba_conv_size, hedgemamba_conv_activation
        if block not in BLOCKS:
            raise ValueError(f"block: expected one of {', '.join(BLOCKS)}, got {block!r}")
        unknown = sorted(set(self.mixer_types) - set(MIXER_TYPES))
        if unknown or len(self.mixer_types) != num_hidden_layers:
            raise ValueError(f"mixer_types: expected {num_hidden_layers} of {', '.join(MIXER_TYPES)}, "
                             f"got {self.mixer_types}")
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
