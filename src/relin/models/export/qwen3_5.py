"""An OPAL hybrid (Qwen3 blocks, attention and Gated DeltaNet layers) as transformers' dense GDN hybrid
``Qwen3_5ForCausalLM`` (``model_type: qwen3_5_text``), which stock transformers, vLLM and SGLang load.

The mapping, read against ``transformers/models/qwen3_5/modeling_qwen3_5.py``:

- every RMSNorm outside the GDN's gated norm is zero-centred there, ``x̂ · (1 + w)``: stored as ``w − 1``;
- attention always gates its output, ``o_proj(attn · σ(gate))`` with ``q_proj`` emitting ``[q_h, gate_h]`` per
  head: zero gate rows give σ(0) = ½, and ``2 · o_proj`` restores the ungated layer exactly;
- rotary embeddings are multimodal (mRoPE) over three position rows; a text-only model feeds the same positions
  to all three, so any ``mrope_section`` summing to ``head_dim / 2`` with ``partial_rotary_factor`` 1.0 is
  relin's full 1-D RoPE;
- GDN: ``in_proj_qkv = [q_proj; k_proj; v_proj]``, one depthwise ``conv1d`` over ``[q | k | v]`` (no bias, SiLU),
  ``in_proj_z = g_proj``, ``in_proj_a/b = a_proj/b_proj``, ``out_proj = o_proj``; ``A_log``, ``dt_bias`` and the
  gated norm (not zero-centred) as they are; as many key heads as value heads, ``K = V = head_dim``.

Not representable, and refused by :func:`export_problems`: a block other than Qwen3's, mixers other than
attention and GDN (SWA, Hedgehog, HedgeMamba), GDN's per-head q/k RMSNorm before the L2 norm, β in (0, 2)
(negative eigenvalues), and a short convolution without SiLU.
"""
from __future__ import annotations

import torch

from ..hybrid.configuration import HybridConfig

LAYER_TYPES = {"attention": "full_attention", "gdn": "linear_attention"}


def export_problems(config: HybridConfig) -> list[str]:
    """Why ``config`` has no exact ``qwen3_5_text`` counterpart: one entry per option (empty when it has one)."""
    problems = []
    if config.block != "qwen3":
        problems.append(f"block {config.block!r}: qwen3_5_text has Qwen3's blocks (RMSNorm, gated MLP)")
    other = sorted(set(config.mixer_types) - set(LAYER_TYPES))
    if other:
        problems.append(f"mixer types {other}: qwen3_5_text layers are full attention or Gated DeltaNet")
    if config.block == "qwen3" and config.rotary_pct != 1.0:
        problems.append(f"rotary_pct {config.rotary_pct}: relin's Qwen3 block rotates every feature")
    if "gdn" in config.mixer_types:
        gdn = config.layer("gdn")
        if gdn.qk_norm:
            problems.append("gdn.qk_norm true: Qwen3.5's GDN has no q/k RMSNorm before the L2 norm "
                            "(expected opal.gdn.qk_norm: false)")
        if gdn.allow_neg_eigval:
            problems.append("gdn.allow_neg_eigval true: Qwen3.5's β = σ(b) lies in (0, 1) (expected false)")
        if gdn.conv_activation != "silu":
            problems.append(f"gdn.conv_activation {gdn.conv_activation!r}: Qwen3.5's short convolution applies SiLU "
                            f"(expected silu)")
    return problems


def qwen3_5_config(config: HybridConfig):
    """The ``Qwen3_5TextConfig`` of a hybrid that :func:`export_problems` accepts."""
    from transformers import Qwen3_5TextConfig

    head_dim = config.head_dim
    rope = {"rope_type": "default", "rope_theta": config.rope_theta, "partial_rotary_factor": 1.0,
            "mrope_section": [head_dim // 2, 0, 0], "mrope_interleaved": True}
    conv_size = config.layer("gdn").conv_size if "gdn" in config.mixer_types else 4
    return Qwen3_5TextConfig(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size, intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        num_key_value_heads=config.num_key_value_heads, head_dim=head_dim, hidden_act="silu",
        max_position_embeddings=config.max_position_embeddings, initializer_range=config.initializer_range,
        rms_norm_eps=config.rms_norm_eps, tie_word_embeddings=config.tie_word_embeddings, rope_parameters=rope,
        partial_rotary_factor=1.0, attention_bias=False, linear_conv_kernel_dim=conv_size,
        linear_key_head_dim=head_dim, linear_value_head_dim=head_dim,
        linear_num_key_heads=config.num_attention_heads, linear_num_value_heads=config.num_attention_heads,
        layer_types=[LAYER_TYPES[kind] for kind in config.mixer_types],
        **{key: getattr(config, key, None) for key in ("pad_token_id", "bos_token_id", "eos_token_id")})


def _zero_centred(weight: torch.Tensor) -> torch.Tensor:
    return weight - 1.0


def _gated_q_proj(weight: torch.Tensor, heads: int, head_dim: int) -> torch.Tensor:
    """``[H·D, C]`` query rows -> ``[H·2D, C]``: per head its D query rows then D zero gate rows."""
    q = weight.view(heads, head_dim, -1)
    return torch.cat([q, torch.zeros_like(q)], dim=1).reshape(heads * 2 * head_dim, -1)


def qwen3_5_state_dict(model, config: HybridConfig) -> dict[str, torch.Tensor]:
    """``model``'s (a :class:`~relin.models.hybrid.HybridForCausalLM`) weights under ``Qwen3_5ForCausalLM``'s names."""
    source = {k: v.detach() for k, v in model.state_dict().items()}
    out = {"model.embed_tokens.weight": source["model.embed_tokens.weight"],
           "model.norm.weight": _zero_centred(source["model.norm.weight"])}
    if not config.tie_word_embeddings:
        out["lm_head.weight"] = source["lm_head.weight"]
    for i, kind in enumerate(config.mixer_types):
        layer = f"model.layers.{i}."  # the same prefix in both layouts
        for norm in ("input_layernorm", "post_attention_layernorm"):
            out[f"{layer}{norm}.weight"] = _zero_centred(source[f"{layer}{norm}.weight"])
        for proj in ("gate_proj", "up_proj", "down_proj"):
            out[f"{layer}mlp.{proj}.weight"] = source[f"{layer}mlp.{proj}.weight"]
        if kind == "attention":
            attn = f"{layer}self_attn."
            out[attn + "q_proj.weight"] = _gated_q_proj(source[attn + "q_proj.weight"], config.num_attention_heads,
                                                        config.head_dim)
            out[attn + "k_proj.weight"] = source[attn + "k_proj.weight"]
            out[attn + "v_proj.weight"] = source[attn + "v_proj.weight"]
            out[attn + "o_proj.weight"] = 2.0 * source[attn + "o_proj.weight"]
            out[attn + "q_norm.weight"] = _zero_centred(source[attn + "q_norm.weight"])
            out[attn + "k_norm.weight"] = _zero_centred(source[attn + "k_norm.weight"])
        else:
            gdn = f"{layer}linear_attn."
            out[gdn + "in_proj_qkv.weight"] = torch.cat([source[gdn + f"{p}_proj.weight"] for p in "qkv"])
            out[gdn + "conv1d.weight"] = torch.cat([source[gdn + f"{p}_conv.weight"] for p in "qkv"])[:, None, :]
            out[gdn + "in_proj_z.weight"] = source[gdn + "g_proj.weight"]
            out[gdn + "in_proj_a.weight"] = source[gdn + "a_proj.weight"]
            out[gdn + "in_proj_b.weight"] = source[gdn + "b_proj.weight"]
            out[gdn + "out_proj.weight"] = source[gdn + "o_proj.weight"]
            out[gdn + "norm.weight"] = source[gdn + "o_norm.weight"]
            out[gdn + "A_log"] = source[gdn + "A_log"]
            out[gdn + "dt_bias"] = source[gdn + "dt_bias"]
    return out


@torch.no_grad()
def to_qwen3_5(model):
    """A ``Qwen3_5ForCausalLM`` (fp32) computing what ``model`` (a hybrid of attention and GDN layers) computes.
    Raises :class:`~relin.errors.InputError` naming every option that has no counterpart."""
    from transformers import Qwen3_5ForCausalLM

    from ...errors import InputError

    if not isinstance(model.config, HybridConfig):
        raise InputError(f"export to qwen3_5_text: a {model.config.model_type} model ({type(model).__name__}), not a "
                         f"relin hybrid; expected an OPAL hybrid (model_type relin_hybrid, e.g. results/opal/onpolicy/"
                         f"model)")
    problems = export_problems(model.config)
    if problems:
        raise InputError(f"export to qwen3_5_text: {'; '.join(problems)}")
    config = qwen3_5_config(model.config)
    exported = Qwen3_5ForCausalLM(config).to(torch.float32)
    weights = {k: v.to(torch.float32) for k, v in qwen3_5_state_dict(model, model.config).items()}
    missing, unexpected = exported.load_state_dict(weights, strict=False)
    missing = [k for k in missing if not (k == "lm_head.weight" and config.tie_word_embeddings)]
    if missing or unexpected:
        raise RuntimeError(f"qwen3_5_text mapping out of date with transformers: missing {missing}, "
                           f"unexpected {unexpected}")
    if config.tie_word_embeddings:
        exported.tie_weights()
    return exported.eval()
