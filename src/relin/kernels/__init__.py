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
import importlib

# Each public op -> the package of its op directory. An op is imported when first used, so a stage imports (and its
# DVC deps and checkpoint digest hold) only the ops it runs; the layers import from the op's package directly.
# No op directory takes its op's name: importing a subpackage sets it as this package's attribute, which would then
# shadow the op for every later `from relin.kernels import <op>`.
_OPS = {
    **dict.fromkeys(("chunk_decayed_linear_attn", "fused_recurrent_decayed_linear_attn",
                     "naive_recurrent_decayed_linear_attn"), "decayed_linear_attn"),
    **dict.fromkeys(("decode_attention", "naive_decode_attention"), "flash_decoding"),
    **dict.fromkeys(("chunk_gated_delta_rule", "fused_recurrent_gated_delta_rule", "gdn_gates", "naive_gdn_gates",
                     "naive_recurrent_gated_delta_rule"), "gated_delta_rule"),
    **dict.fromkeys(("multiscale_diag_retention", "multiscale_diag_retention_step"), "multiscale_retention"),
    **dict.fromkeys(("rms_norm", "naive_rms_norm"), "fused_norm"),
    **dict.fromkeys(("short_conv_step", "naive_short_conv_step"), "short_conv"),
}
__all__ = list(_OPS)


def __getattr__(name: str):
    if name in _OPS:
        return getattr(importlib.import_module(f".{_OPS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (ops: {', '.join(_OPS)})")


def __dir__() -> list[str]:
    return sorted([*globals(), *_OPS])
