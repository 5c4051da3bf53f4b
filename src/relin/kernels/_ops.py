"""The public ops (re-exported by ``relin.kernels``)."""
from .decayed_linear_attn import (  # noqa: F401
    chunk_decayed_linear_attn,
    fused_recurrent_decayed_linear_attn,
    naive_recurrent_decayed_linear_attn,
)
from .decode_attention import decode_attention, naive_decode_attention  # noqa: F401
from .gated_delta_rule import (  # noqa: F401
    chunk_gated_delta_rule,
    fused_recurrent_gated_delta_rule,
    gdn_gates,
    naive_gdn_gates,
    naive_recurrent_gated_delta_rule,
)
from .multiscale_retention import multiscale_diag_retention, multiscale_diag_retention_step  # noqa: F401
from .rms_norm import naive_rms_norm, rms_norm  # noqa: F401
from .short_conv import naive_short_conv_step, short_conv_step  # noqa: F401

__all__ = ["decode_attention", "naive_decode_attention",
           "chunk_decayed_linear_attn", "fused_recurrent_decayed_linear_attn", "naive_recurrent_decayed_linear_attn",
           "chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "naive_recurrent_gated_delta_rule",
           "gdn_gates", "naive_gdn_gates", "rms_norm", "naive_rms_norm", "short_conv_step", "naive_short_conv_step",
           "multiscale_diag_retention", "multiscale_diag_retention_step"]
