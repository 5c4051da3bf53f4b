"""The hybrid model's Hugging Face config: a teacher's transformer with a mixer type per layer."""
from __future__ import annotations

from transformers import PretrainedConfig

# Mixer types a layer may have; HedgeMamba adds its types to this tuple and to the modeling's registry.
MIXER_TYPES = ("attention", "swa", "gdn")


class HybridConfig(PretrainedConfig):
    """Qwen3-architecture decoder (RMSNorm, q/k-normed GQA attention with RoPE, gated MLP) whose
    layer i mixes tokens with ``mixer_types[i]``:

    - ``attention``: the teacher's softmax attention;
    - ``swa``: the same attention over a window of ``swa_window`` tokens plus ``swa_sinks`` sink tokens;
    - ``gdn``: Gated DeltaNet (``gdn_*`` options) with every query head a k/v head.
    """

    model_type = "relin_hybrid"

    def __init__(self, vocab_size: int = 256, hidden_size: int = 128, intermediate_size: int = 384,
                 num_hidden_layers: int = 4, num_attention_heads: int = 4, num_key_value_heads: int = 4,
                 head_dim: int = 32, rms_norm_eps: float = 1e-6, rope_theta: float = 10000.0,
                 max_position_embeddings: int = 1024, initializer_range: float = 0.02,
                 tie_word_embeddings: bool = True, mixer_types: list[str] | None = None,
                 swa_window: int = 256, swa_sinks: int = 4, gdn_conv_size: int = 4, gdn_conv_activation: str = "silu",
                 gdn_qk_norm: bool = True, gdn_allow_neg_eigval: bool = False, kernel_backend: str = "auto",
                 **kwargs):
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
        unknown = sorted(set(self.mixer_types) - set(MIXER_TYPES))
        if unknown or len(self.mixer_types) != num_hidden_layers:
            raise ValueError(f"mixer_types: expected {num_hidden_layers} of {', '.join(MIXER_TYPES)}, "
                             f"got {self.mixer_types}")
        super().__init__(tie_word_embeddings=tie_word_embeddings, **kwargs)
