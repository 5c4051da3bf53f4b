"""Teacher language models: tiny ``Qwen3ForCausalLM`` / ``GPTNeoXForCausalLM`` built from
:class:`~relin.config.teacher.TeacherModelConfig`, or checkpoints loaded by Hugging Face id or local path.

Loading never runs repository code (``trust_remote_code=False``), reads safetensors only, and stays offline: a hub
id resolves to its snapshot in the local Hugging Face cache (:mod:`relin.hub`).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from ..config.teacher import TeacherModelConfig

def _special_ids(tokenizer: "PreTrainedTokenizerBase") -> dict[str, int | None]:
    return {"pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.bos_token_id,
            "eos_token_id": tokenizer.eos_token_id}


def teacher_config(cfg: "TeacherModelConfig", vocab_size: int, special_ids: dict[str, int | None]):
    """The transformers config of a teacher; ``vocab_size`` comes from the tokenizer."""
    from transformers import GPTNeoXConfig, Qwen3Config

    rope = {"rope_type": "default", "rope_theta": cfg.rope_theta}
    if cfg.family == "qwen3":
        return Qwen3Config(
            vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
            num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.kv_heads,
            head_dim=cfg.head_width, intermediate_size=cfg.intermediate_size,
            max_position_embeddings=cfg.max_position_embeddings, rope_parameters=rope,
            initializer_range=cfg.initializer_range, tie_word_embeddings=True, **special_ids)
    if cfg.family == "gpt_neox":
        return GPTNeoXConfig(
            vocab_size=vocab_size, hidden_size=cfg.hidden_size, num_hidden_layers=cfg.num_hidden_layers,
            num_attention_heads=cfg.num_attention_heads, intermediate_size=cfg.intermediate_size,
            max_position_embeddings=cfg.max_position_embeddings,
            rope_parameters={**rope, "partial_rotary_factor": cfg.rotary_fraction},
            initializer_range=cfg.initializer_range, tie_word_embeddings=False, **special_ids)
    raise InputError(f"teacher family {cfg.family!r} is not supported (expected qwen3 or gpt_neox)")


def build_teacher(cfg: "TeacherModelConfig", tokenizer: "PreTrainedTokenizerBase",
                  seed: int = 0) -> "PreTrainedModel":
    """A freshly initialised teacher (fp32) whose vocabulary is the tokenizer's (``len(tokenizer)``)."""
    import torch
    from transformers import AutoModelForCausalLM

    config = teacher_config(cfg, len(tokenizer), _special_ids(tokenizer))
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32)


def load_pretrained(reference: str) -> "PreTrainedModel":
    """A causal LM of transformers' own classes from a local ``save_pretrained`` directory or a Hugging Face id in
    the local cache (offline, safetensors, no repository code); a relin hybrid loads through
    :func:`relin.models.saved.load_saved`. Raises :class:`InputError` with one line when it cannot be loaded."""
    from transformers import AutoModelForCausalLM

    from ..hub import resolve

    path = resolve(reference, "model")
    missing = [name for name, found in (("config.json", (path / "config.json").is_file()),
                                        ("*.safetensors", any(path.glob("*.safetensors")))) if not found]
    if missing:
        raise InputError(f"model {reference}: not a save_pretrained directory (missing {' and '.join(missing)})")
    try:
        return AutoModelForCausalLM.from_pretrained(str(path), trust_remote_code=False, use_safetensors=True,
                                                    local_files_only=True)
    except Exception as err:  # noqa: BLE001 - safetensors, json and OS errors all mean a damaged checkpoint
        first = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise InputError(f"model {reference}: could not load ({type(err).__name__}: {first}); the checkpoint is "
                         f"damaged or incomplete: write it again (the stage that saved it) or download it again") \
            from None
