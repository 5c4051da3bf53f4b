"""OPAL's conversion (Raje et al. 2026, §3 and Table 5): a Qwen3 teacher (or a Llama one: the same block without
q/k norms) becomes a hybrid whose kept layers stay softmax attention and whose other layers become Gated DeltaNet,
or a sliding window with sink tokens for the SWA(window, sinks) baseline.

Everything but the replaced mixers is the teacher's (embeddings, norms, MLPs, head, kept attention).
A GDN layer takes q_proj and o_proj as they are and k_proj, v_proj expanded from the teacher's
key/value heads to all query heads at head granularity (query head i read kv head i // group, as
``repeat_kv`` does), and keeps a Qwen3 teacher's q/k norms when ``gdn.qk_norm``; its decay (A_log, dt_bias), β,
output gate, short convolutions and gated norm are new. A SWA layer is the teacher's attention with a window.
"""
from __future__ import annotations

import torch

from ...config.opal import GDNConfig, SWAConfig
from ...errors import InputError
from ..hybrid import HybridConfig, HybridForCausalLM
from .heads import expand_heads

# Teachers whose attention layers the conversion copies (Llama's block is Qwen3's without the q/k norms).
CONVERTIBLE = ("qwen3", "llama")


def layer_conversion_kl(teacher, batches: list[dict], gdn: GDNConfig | None = None, seed: int = 0,
                        kernel_backend: str = "auto") -> list[float]:
    """Per layer i, the mean per-token KL(teacher ‖ teacher with layer i alone converted to Gated DeltaNet) on
    ``batches`` (``input_ids``, ``attention_mask`` ``[B, T]``): how much that layer's attention matters to the
    next-token distribution when the others keep theirs (fresh GDN parameters, no training). Runs on the
    teacher's device."""
    import torch.nn.functional as F

    layers, device = teacher.config.num_hidden_layers, next(teacher.parameters()).device
    batches = [{k: v.to(device) for k, v in b.items()} for b in batches]
    scores = []
    with torch.no_grad():
        reference = [F.log_softmax(teacher(**b).logits.float(), -1) for b in batches]
        for i in range(layers):
            types = ["gdn" if j == i else "attention" for j in range(layers)]
            student = convert(teacher, types, seed, gdn=gdn, kernel_backend=kernel_backend).to(device).eval()
            total, tokens = 0.0, 0
            for b, log_p in zip(batches, reference):
                log_q = F.log_softmax(student(**b).logits.float(), -1)
                kl = (log_p.exp() * (log_p - log_q)).sum(-1)
                real = b["attention_mask"].bool()
                total, tokens = total + float(kl[real].sum()), tokens + int(real.sum())
            scores.append(total / max(tokens, 1))
    return scores


@torch.no_grad()
def convert(teacher, mixer_types: list[str], seed: int = 0, *, gdn: GDNConfig | None = None,
            swa: SWAConfig | None = None, kernel_backend: str = "auto") -> HybridForCausalLM:
    """A hybrid with ``mixer_types`` per layer, initialised from ``teacher`` (a ``Qwen3ForCausalLM`` or
    ``LlamaForCausalLM``); ``gdn`` and ``swa`` are the replaced layers' options."""
    model_type = teacher.config.model_type
    if model_type not in CONVERTIBLE:
        raise InputError(f"teacher model type {model_type!r}: OPAL converts {' or '.join(CONVERTIBLE)} teachers")
    if gdn is not None and gdn.qk_norm and model_type != "qwen3" and "gdn" in mixer_types:
        raise InputError(f"opal.gdn.qk_norm: a {model_type} teacher has no q/k norms to keep; expected false")
    config = HybridConfig.from_teacher(teacher.config, mixer_types, kernel_backend=kernel_backend,
                                       gdn=gdn or GDNConfig(), swa=swa or SWAConfig())
    torch.manual_seed(seed)
    student = HybridForCausalLM(config).to(torch.float32)
    source = teacher.state_dict()
    copied = {k: v for k, v in source.items() if ".self_attn." not in k}
    for i, kind in enumerate(mixer_types):
        attn = {k.removeprefix(f"model.layers.{i}.self_attn."): v for k, v in source.items()
                if k.startswith(f"model.layers.{i}.self_attn.")}
        if kind == "gdn":
            heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
            attn["k_proj.weight"] = expand_heads(attn["k_proj.weight"], kv_heads, heads)
            attn["v_proj.weight"] = expand_heads(attn["v_proj.weight"], kv_heads, heads)
            if not config.layer("gdn").qk_norm:
                attn = {k: v for k, v in attn.items() if k not in ("q_norm.weight", "k_norm.weight")}
        prefix = f"model.layers.{i}.{'linear_attn' if kind == 'gdn' else 'self_attn'}."
        copied.update({prefix + k: v for k, v in attn.items()})
    missing, unexpected = student.load_state_dict(copied, strict=False)
    new = {"linear_attn." + name for name in ("a_proj.weight", "b_proj.weight", "g_proj.weight", "A_log", "dt_bias",
                                               "o_norm.weight", "q_conv.weight", "k_conv.weight", "v_conv.weight")}
    stray = [k for k in missing if not any(k.endswith(n) for n in new) and k != "lm_head.weight"]
    if stray or unexpected:
        raise ValueError(f"conversion: teacher and hybrid disagree on {stray or unexpected}")
    if config.tie_word_embeddings:
        student.tie_weights()
    return student
