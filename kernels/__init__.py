"""relin's Triton kernels, installed as ``relin.kernels``.

Three op families serve all three papers (layout ``[B, T, H, D]``, fp32 states):

- ``chunk_gated_delta_rule`` / ``fused_recurrent_gated_delta_rule``: OPAL's Gated DeltaNet.
- ``chunk_decayed_linear_attn``: Hedgehog linear attention, Mamba-2/SSD, the HedgeMamba block.
- ``multiscale_diag_retention``: the LIA-MTR bridge recurrence (eqs. 3-5).
- ``decode_attention``: one query per row over a static KV cache (split-K flash-decoding, grouped heads read in
  place): the decode step of the teachers' and the hybrids' attention layers.
- ``rms_norm`` (alone, after the residual add, or gated), ``short_conv_step`` and ``gdn_gates``: the one-pass
  forward kernels that replace a decoder block's many small elementwise launches at inference.

On CUDA tensors they run Triton kernels; on CPU tensors a chunked PyTorch path (see
``relin.kernels.common.backend``).

Any Python started in the repository root (``python -c``, ``python -m``, a notebook) has this folder on its path
as a top-level ``kernels``: that name belongs to Hugging Face's ``kernels`` distribution, which transformers
imports. Imported under that name, this package hands the name over to the installed distribution (or, with
none installed, refuses), so it is only ever importable as ``relin.kernels``.
"""
if __name__ != "relin.kernels":
    from ._shadow import hand_over

    hand_over(__name__, __file__)
else:
    from ._ops import *  # noqa: F401,F403
