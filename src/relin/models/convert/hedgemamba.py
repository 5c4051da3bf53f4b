"""HedgeMamba's weight copies (seeds/001 §3): a GPT-NeoX (Pythia) or Llama teacher -> a hybrid of Hedgehog layers
(stage 1's student) -> a hybrid of HedgeMamba blocks initialised from it (eq. 7), and the random-init
control of the same shape.

A Llama teacher (a pretrained checkpoint such as SmolLM2) needs no splitting: its ``self_attn.{q,k,v,o}_proj`` copy
by name, and its grouped key/value heads are repeated to every query head (query head i reads kv head i // group, as
``repeat_kv`` does), since a Hedgehog layer and a HedgeMamba block keep one key/value projection per head; the
Hedgehog layer then computes what the teacher's projections give each head.

GPT-NeoX specifics, handled here rather than hoped for (methods.md §7A.6):

- ``query_key_value`` is one fused ``[3·H·D, C]`` projection laid out per head as ``[q_h, k_h, v_h]``
  (``view(H, 3·D)`` in ``GPTNeoXAttention``); :func:`split_fused_qkv` takes the q, k and v rows of each head;
- its projections have biases (kept: the hybrid's GPT-NeoX block has biased q/k/v/o);
- RoPE rotates ``rotary_pct`` of each head (the hybrid's rotary width), and where the Hedgehog φ sits
  relative to it is the ``hedgehog`` section's ``feature_position``;
- the residual is parallel, ``x + attn(ln₁ x) + mlp(ln₂ x)`` (``use_parallel_residual``);
- the embeddings are untied (``embed_in`` and ``embed_out``, named ``lm_head`` by transformers 5).

Everything but the mixers is the teacher's: embeddings, LayerNorms, MLPs, final norm and head.
"""
from __future__ import annotations

import torch

from ...config.hedgemamba import HedgehogLayerConfig, MambaBlockConfig
from ...config.loader import as_dict
from ...errors import InputError
from ...layers.hedgemamba import HedgeMamba
from ..hybrid import HybridConfig, HybridForCausalLM
from .heads import expand_heads

# GPT-NeoX name -> the hybrid's, for everything outside the attention.
RENAMES = (("gpt_neox.embed_in.", "model.embed_tokens."), ("gpt_neox.final_layer_norm.", "model.norm."),
           ("gpt_neox.layers.", "model.layers."), ("embed_out.", "lm_head."))
# A HedgeMamba block's parameters that no attention or Hedgehog layer has (Mamba's own).
MAMBA_OWN = ("z_proj.weight", "z_proj.bias", "dt_proj.weight", "conv.weight", "conv_bias", "A_log", "dt_bias", "D",
             "norm_weight")
# HedgeMamba block <- Hedgehog layer (eq. 7: B <- φ(K x), C <- φ(Q x), X <- V x).
MAMBA_FROM_HEDGEHOG = {"C_proj": "q_proj", "B_proj": "k_proj", "x_proj": "v_proj", "out_proj": "o_proj",
                       "feature_map_C": "feature_map_q", "feature_map_B": "feature_map_k"}


# Teachers HedgeMamba converts: Pythia's GPT-NeoX (the seed's) and Llama (pretrained checkpoints).
CONVERTIBLE = ("gpt_neox", "llama")


def hybrid_config(teacher_config, mixer_types: list[str], **sections) -> HybridConfig:
    """The hybrid config (the teacher's block) of a GPT-NeoX or Llama teacher config with the given layer types;
    a linear mixer keeps a key/value head per query head."""
    if teacher_config.model_type not in CONVERTIBLE:
        raise InputError(f"teacher model type {teacher_config.model_type!r}: HedgeMamba converts "
                         f"{' or '.join(CONVERTIBLE)} teachers")
    config = HybridConfig.from_teacher(teacher_config, mixer_types, **sections)
    if any(kind != "attention" for kind in mixer_types):
        config.num_key_value_heads = config.num_attention_heads
    return config


def teacher_attention(teacher, index: int) -> str:
    """The module name of the teacher's attention in layer ``index`` (GPT-NeoX's ``attention``, Llama's
    ``self_attn``): what stage 1 matches each Hedgehog layer to."""
    module = "attention" if teacher.config.model_type == "gpt_neox" else "self_attn"
    return f"{teacher.base_model_prefix}.layers.{index}.{module}"


def split_fused_qkv(weight: torch.Tensor, bias: torch.Tensor | None, num_heads: int) -> dict[str, torch.Tensor]:
    """GPT-NeoX's fused ``query_key_value`` (``weight [3·H·D, C]``, ``bias [3·H·D]``, per head [q, k, v])
    -> ``{q,k,v}_proj.{weight,bias}`` of ``[H·D, C]`` / ``[H·D]`` each."""
    head_dim = weight.shape[0] // (3 * num_heads)
    parts = weight.view(num_heads, 3, head_dim, -1)
    out = {f"{name}_proj.weight": parts[:, i].reshape(num_heads * head_dim, -1) for i, name in enumerate("qkv")}
    if bias is not None:
        b = bias.view(num_heads, 3, head_dim)
        out.update({f"{name}_proj.bias": b[:, i].reshape(-1) for i, name in enumerate("qkv")})
    return out


def _teacher_weights(teacher, expand_kv: bool = True) -> dict[str, torch.Tensor]:
    """The teacher's state dict under the hybrid's names, attention as ``layers.i.attention.{q,k,v,o}_proj``
    (GPT-NeoX's split from its fused projection; Llama's k/v repeated to every query head with ``expand_kv``)."""
    if teacher.config.model_type == "llama":
        return _llama_weights(teacher, expand_kv)
    out = {}
    heads = teacher.config.num_attention_heads
    for key, value in teacher.state_dict().items():
        if ".attention.query_key_value.weight" in key:
            prefix = key.removesuffix("query_key_value.weight")
            qkv = split_fused_qkv(value, teacher.state_dict().get(prefix + "query_key_value.bias"), heads)
            out.update({prefix + name: tensor for name, tensor in qkv.items()})
        elif ".attention.dense." in key:
            out[key.replace(".attention.dense.", ".attention.o_proj.")] = value
        elif ".attention.query_key_value.bias" not in key and not key.endswith(("attention.bias", "masked_bias")):
            out[key] = value
    renamed = {}
    for key, value in out.items():
        for old, new in RENAMES:
            if key.startswith(old):
                key = new + key.removeprefix(old)
                break
        renamed[key] = value
    return renamed


def _llama_weights(teacher, expand_kv: bool) -> dict[str, torch.Tensor]:
    heads, kv_heads = teacher.config.num_attention_heads, teacher.config.num_key_value_heads
    out = {}
    for key, value in teacher.state_dict().items():
        key = key.replace(".self_attn.", ".attention.")
        if expand_kv and key.endswith((".attention.k_proj.weight", ".attention.v_proj.weight")):
            value = expand_heads(value, kv_heads, heads)
        out[key] = value
    return out


@torch.no_grad()
def _load(student: HybridForCausalLM, weights: dict[str, torch.Tensor], new: tuple[str, ...]) -> HybridForCausalLM:
    """Load ``weights`` into ``student``; every parameter it lacks must end with one of ``new``."""
    missing, unexpected = student.load_state_dict(weights, strict=False)
    tied = student.config.tie_word_embeddings
    stray = [k for k in missing if not k.endswith(new) and not (k == "lm_head.weight" and tied)]
    if stray or unexpected:
        raise ValueError(f"conversion: source and hybrid disagree on {stray or unexpected}")
    if student.config.tie_word_embeddings:
        student.tie_weights()
    return student


@torch.no_grad()
def hedgehog_from_teacher(teacher, seed: int = 0, *, hedgehog: HedgehogLayerConfig | None = None,
                          kernel_backend: str = "auto") -> HybridForCausalLM:
    """Stage 1's student: every attention layer of a ``GPTNeoXForCausalLM`` or ``LlamaForCausalLM`` a Hedgehog
    layer with the teacher's q/k/v/o (split from GPT-NeoX's fused projection, Llama's k/v repeated to every head)
    and identity feature maps (Hedgehog's init)."""
    layers = teacher.config.num_hidden_layers
    config = hybrid_config(teacher.config, ["hedgehog"] * layers, hedgehog=hedgehog or HedgehogLayerConfig(),
                           kernel_backend=kernel_backend)
    torch.manual_seed(seed)
    student = HybridForCausalLM(config).to(torch.float32)
    weights = {k.replace(".attention.", ".linear_attn."): v for k, v in _teacher_weights(teacher).items()}
    return _load(student, weights, ("feature_map_q.weight", "feature_map_q.bias", "feature_map_k.weight",
                                    "feature_map_k.bias"))


@torch.no_grad()
def attention_from_teacher(teacher) -> HybridForCausalLM:
    """The teacher itself as a hybrid of ``attention`` layers (its own block): the check that the block, the split
    of GPT-NeoX's fused projection and the renames reproduce ``GPTNeoXForCausalLM`` / ``LlamaForCausalLM``."""
    config = hybrid_config(teacher.config, ["attention"] * teacher.config.num_hidden_layers)
    student = HybridForCausalLM(config).to(torch.float32)
    weights = {k.replace(".attention.", ".self_attn."): v for k, v in _teacher_weights(teacher, False).items()}
    return _load(student, weights, ())


def hedgemamba_hybrid(config: HybridConfig, **options) -> HybridForCausalLM:
    """A hybrid of ``config`` whose HedgeMamba blocks also take ``options`` (:class:`~relin.layers.hedgemamba.
    HedgeMamba`'s ``norm``, ``feature_maps``, ``conv_bias``), which are written into the config's ``hedgemamba``
    section, so a saved model names them. While the block config has no such fields, loading that model is a
    ConfigError naming the key (not a silently different block); once it has them, the model loads as built."""
    student = HybridForCausalLM(config).to(torch.float32)
    if options:
        block, feature_map = config.layer("hedgemamba"), config.layer("hedgehog").feature_map
        for layer in student.model.layers:
            if layer.kind == "hedgemamba":
                layer.mamba = HedgeMamba(config.hidden_size, config.num_attention_heads, config.head_dim, block,
                                         feature_map=feature_map, bias=config.block == "gpt_neox",
                                         backend=config.kernel_backend, **options)
        config.hedgemamba = {**config.hedgemamba, **options}
    return student


def hedgemamba_config(config: HybridConfig, mamba: MambaBlockConfig) -> HybridConfig:
    """The HedgeMamba hybrid's config from a Hedgehog hybrid's: every ``hedgehog`` layer a ``hedgemamba`` one."""
    values = {**config.to_dict(), "hedgemamba": as_dict(mamba)}
    values["mixer_types"] = ["hedgemamba" if kind == "hedgehog" else kind for kind in config.mixer_types]
    for key in ("model_type", "transformers_version", "architectures"):
        values.pop(key, None)
    return HybridConfig(**values)


@torch.no_grad()
def hedgemamba_from_hedgehog(hedgehog: HybridForCausalLM, mamba: MambaBlockConfig | None = None, *,
                             decay: str = "exact", norm: str | None = None) -> HybridForCausalLM:
    """Eq. 7 and App. B: each Hedgehog layer's q/k/v/o and feature maps copied into a HedgeMamba block
    (C <- q, B <- k, x <- v, out <- o, φ_C <- φ_q, φ_B <- φ_k) whose Λ, Δ, conv, gate and D are set to
    the identity (:meth:`~relin.layers.hedgemamba.HedgeMamba.set_identity`). With φ before RoPE the
    model's logits equal the Hedgehog model's to fp32 rounding (``decay="exact"``) or to ≤ 1e-4 at any
    length up to ``max_position_embeddings`` (``near_identity``: Λ's gradient visible to a plain AdamW);
    with φ after RoPE they do not (the block has no RoPE).

    ``decay``: ``exact`` | ``near_identity`` (:data:`~relin.layers.hedgemamba.DECAY_INITS`). ``norm``: the blocks'
    output normalisation when not the config's (``none``: eq. 8's un-normalised Y_φ, the ablation of eqs. 9-10;
    the logits then differ from the Hedgehog model's, which is normalised)."""
    config = hedgemamba_config(hedgehog.config, mamba or MambaBlockConfig())
    student = hedgemamba_hybrid(config, **({} if norm is None else {"norm": norm}))
    weights = {}
    for key, value in hedgehog.state_dict().items():
        if ".linear_attn." in key:
            head, _, rest = key.partition(".linear_attn.")
            module, _, param = rest.partition(".")
            target = {v: k for k, v in MAMBA_FROM_HEDGEHOG.items()}[module]
            weights[f"{head}.mamba.{target}.{param}"] = value
        else:
            weights[key] = value
    _load(student, weights, MAMBA_OWN)
    for layer in student.model.layers:
        if layer.kind == "hedgemamba":
            layer.mamba.set_identity(decay, max_length=config.max_position_embeddings)
    return student


@torch.no_grad()
def random_mamba_from_teacher(teacher, seed: int = 0, *, hedgehog: HedgehogLayerConfig | None = None,
                              mamba: MambaBlockConfig | None = None, kernel_backend: str = "auto",
                              stock_conv: bool = False) -> HybridForCausalLM:
    """The control: the same HedgeMamba shape with every mixer parameter freshly initialised (mamba_ssm's Mamba-2
    SSM init, :meth:`~relin.layers.hedgemamba.HedgeMamba.reset_ssm`; random projections; identity feature maps)
    and everything else the teacher's. The conv starts as the identity filter, or with ``stock_conv`` as
    ``nn.Conv1d``'s default init (Mamba's; with the SiLU that stage 2 unlocks, the stock conv branch)."""
    layers = teacher.config.num_hidden_layers
    config = hybrid_config(teacher.config, ["hedgemamba"] * layers, hedgehog=hedgehog or HedgehogLayerConfig(),
                           hedgemamba=mamba or MambaBlockConfig(), kernel_backend=kernel_backend)
    torch.manual_seed(seed)
    student = HybridForCausalLM(config).to(torch.float32)
    if stock_conv:
        for layer in student.model.layers:
            layer.mamba.reset_conv()
    weights = {k: v for k, v in _teacher_weights(teacher).items() if ".attention." not in k}
    return _load(student, weights, tuple(f"{name}" for name, _ in student.model.layers[0].mamba.named_parameters()))

