"""relin's Triton kernels (``relin.kernels``).

Three op families serve all three papers (layout ``[B, T, H, D]``, fp32 states):

- ``chunk_gated_delta_rule`` / ``fused_recurrent_gated_delta_rule``: OPAL's Gated DeltaNet.
- ``chunk_decayed_linear_attn``: Hedgehog linear attention, Mamba-2/SSD, the HedgeMamba block.
- ``multiscale_diag_retention``: the LIA-MTR bridge recurrence (eqs. 3-5).
- ``decode_attention``: one query per row over a static KV cache (split-K flash-decoding, grouped heads read in
  place): the decode step of the teachers' and the hybrids' attention layers.
- ``rms_norm`` (alone, after the residual add, or gated), ``short_conv_step`` and ``gdn_gates``: the one-pass
  forward kernels that replace a decoder block's many small elementwise launches at inference.

On CUDA tensors they run Triton kernels; on CPU tensors a chunked PyTorch path (see
``relin.kernels.common.backend``). The package lives inside ``relin``: a top-level ``kernels`` is Hugging Face's
distribution, which transformers imports.
"""
from ._ops import *  # noqa: F401,F403
