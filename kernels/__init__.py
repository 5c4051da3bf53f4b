"""relin's Triton kernels, installed as ``relin.kernels``.

Three op families serve all three papers (layout ``[B, T, H, D]``, fp32 states):

- ``chunk_gated_delta_rule`` / ``fused_recurrent_gated_delta_rule``: OPAL's Gated DeltaNet.
- ``chunk_decayed_linear_attn``: Hedgehog linear attention, Mamba-2/SSD, the HedgeMamba block.
- ``multiscale_diag_retention``: the LIA-MTR bridge recurrence (eqs. 3-5).

On CUDA tensors they run Triton kernels; on CPU tensors a chunked PyTorch path (see
``relin.kernels.common.backend``).
"""
from .decayed_linear_attn import (  # noqa: E402,F401
    chunk_decayed_linear_attn,
    fused_recurrent_decayed_linear_attn,
    naive_recurrent_decayed_linear_attn,
)
from .gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule, naive_recurrent_gated_delta_rule  # noqa: F401
from .multiscale_retention import multiscale_diag_retention, multiscale_diag_retention_step  # noqa: E402,F401
