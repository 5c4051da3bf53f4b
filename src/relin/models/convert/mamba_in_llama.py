"""Mamba-in-the-Llama's initialisation (Wang et al. 2024, "The Mamba in the Llama: Distilling and Accelerating
Hybrid Models"), HedgeMamba's control as its authors wrote it, on a GPT-NeoX (Pythia) teacher.

Their Mamba-2 recipe (``jxiw/MambaInLlama@60d64dc``, ``mamba2/hybrid_wrapper.py`` with ``init_with_kqvo``, and
``mamba2/hybrid_mamba_layer.py``), step by step, and what each step is here:

1. ``MambaConfig(d_model, {"expand": 1, "ngroups": n_heads, "d_state": head_dim}, d_inner = n_heads·head_dim,
   d_xb = n_kv·head_dim)`` (``train_mamba2/train_hybrid.py``): one SSM head per attention head, d_state = D, so
   each head's state is the attention head's D × D. Here: the HedgeMamba block **without feature maps**
   (``feature_maps=False``), H heads of D.
2. ``in_proj`` rows ``[z, x, B, C, dt]``: x <- ``v_proj``, B <- ``k_proj``, C <- ``q_proj``; ``out_proj`` <- ``o_proj``.
   Here: ``x_proj`` <- v, ``B_proj`` <- k, ``C_proj`` <- q, ``out_proj`` <- the attention's ``dense``, each weight
   and bias (GPT-NeoX's attention is biased, Llama's is not; the fused ``query_key_value`` split per head).
   Pythia has as many key/value heads as query heads (d_xb = d_inner); a Llama teacher's grouped x and B rows
   (d_xb < d_inner, which their layer repeats per head group) are repeated here on the weights, the same
   function. RoPE is dropped.
3. The z and dt rows of ``in_proj`` keep ``nn.Linear``'s default init (no bias): here ``z_proj`` and ``dt_proj``
   keep ``nn.Linear``'s init, the gate bias 0.
4. ``dt_bias`` = softplus⁻¹(Δ), Δ = exp(U·(log 0.1 − log 1e-3) + log 1e-3) floored at 1e-4; then
   ``A_log = log U(1, 16)``; ``D = 1`` (per head); :meth:`~relin.layers.hedgemamba.HedgeMamba.reset_ssm`, same draws
   in the same order.
5. ``conv1d``: ``nn.Conv1d`` (depthwise, kernel 4, bias) at its default init, then SiLU. Here the block's conv taps
   and ``conv_bias`` at ``nn.Conv1d``'s default, U(±1/√K), and ``conv_activation="silu"``.
6. The scan: y_t = Σ_s exp(Σ A Δ) (C_t·B_s) Δ_s x_s + D x_t, **un-normalised** (Mamba-2's SSD; no 1/√D), then
   ``RMSNormGated(d_inner, eps=1e-5, norm_before_gate=False, group_size=head_dim)``: y <- RMSNorm_h(y ⊙ SiLU(z)) · w,
   w = 1. Here ``norm="gated_rms"``.
7. The MLP and both norms of the layer are the teacher's. Here everything outside the mixers is the teacher's
   (embeddings, LayerNorms, MLPs, final norm, head), as in every HedgeMamba conversion.

The one step not reproduced: Mamba-2's ``in_proj`` has no bias, so their gate and Δ rows start without one; this
block's ``z_proj`` has a bias (zero here, so the same function at init).
"""
from __future__ import annotations

import torch

from ...config.hedgemamba import HedgehogLayerConfig, MambaBlockConfig
from ..hybrid import HybridForCausalLM
from .hedgemamba import MAMBA_OWN, _load, _teacher_weights, hedgemamba_hybrid, hybrid_config

# Mamba-in-the-Llama's block: no φ, Mamba-2's gated RMSNorm on an un-normalised scan, a biased conv with SiLU.
BLOCK_OPTIONS = {"feature_maps": False, "norm": "gated_rms", "conv_bias": True}
# Mamba block <- attention projection (their ``init_with_kqvo``).
MAMBA_FROM_ATTENTION = {"C_proj": "q_proj", "B_proj": "k_proj", "x_proj": "v_proj", "out_proj": "o_proj"}


@torch.no_grad()
def mamba_in_llama_from_teacher(teacher, seed: int = 0, *, conv_size: int = 4, kernel_backend: str = "auto"
                                ) -> HybridForCausalLM:
    """Every attention layer of a ``GPTNeoXForCausalLM`` or ``LlamaForCausalLM`` a Mamba-2 block initialised as
    Mamba-in-the-Llama does (the module docstring's steps): q/k/v/o copied into C/B/x/out, no feature map, their Δ,
    A, D and conv init."""
    layers = teacher.config.num_hidden_layers
    block = MambaBlockConfig(conv_size=conv_size, conv_activation="silu")
    config = hybrid_config(teacher.config, ["hedgemamba"] * layers, hedgehog=HedgehogLayerConfig(),
                           hedgemamba=block, kernel_backend=kernel_backend)
    torch.manual_seed(seed)
    student = hedgemamba_hybrid(config, **BLOCK_OPTIONS)
    for layer in student.model.layers:
        layer.mamba.reset_conv()
    by_attention = {v: k for k, v in MAMBA_FROM_ATTENTION.items()}
    weights = {}
    for key, value in _teacher_weights(teacher).items():
        if ".attention." in key:
            head, _, rest = key.partition(".attention.")
            module, _, param = rest.partition(".")
            key = f"{head}.mamba.{by_attention[module]}.{param}"
        weights[key] = value
    return _load(student, weights, MAMBA_OWN)
