"""Tiny random checkpoints of the papers' real classes in a Hugging Face cache under the papers' ids.

Each carries a byte-level BPE tokenizer with its family's real special tokens, pre-tokenizer and chat template
(Qwen: ChatML, no bos, single-digit split, ``<|endoftext|>`` pad; Pythia: ``<|endoftext|>`` as bos, eos and
unk, no pad, no chat template), trained on the words the synthetic tasks and scenes use so that rows stay
about as long as under a real checkpoint's tokenizer. Embedding rows follow the real checkpoints: Qwen3 and
Pythia pad their vocabulary (spare rows), the chat LLM's rows equal its tokenizer (``<image>`` then grows them).
"""
from __future__ import annotations

import shutil
from pathlib import Path

QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2.5-Instruct's template without its tool branches: a default system prompt, ChatML turns, no generation marks.
QWEN25_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or "
    "(message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}")
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]

# The papers' checkpoints (workflow/configs/paper.yaml) and what stands in for each.
PAPER_CHECKPOINTS = {"Qwen/Qwen3-4B": "qwen3", "EleutherAI/pythia-1b": "pythia",
                     "Qwen/Qwen2.5-3B-Instruct": "qwen2_chat", "openai/clip-vit-large-patch14": "clip"}


def corpus() -> list[str]:
    """Text with every word the synthetic tasks (default and smoke sizes) and the scenes use."""
    from relin.config.data import DataConfig
    from relin.data.synth_text import vocabulary_words
    from relin.data.vision import synth

    words = list(dict.fromkeys([*vocabulary_words(DataConfig()), *synth.vocabulary(), *synth.CATEGORIES,
                                "answer", "yes", "no",
                                "is", "there", "a", "an", "in", "the", "image", "of", "how", "many", "what",
                                "colour", "color", "scene", "shapes", "on", "side", "are"]))
    numbers = " ".join(str(n) for n in range(100))
    return [" ".join(words[i:i + 16]) + f" . , : ? {numbers}" for i in range(0, len(words), 16)] * 4


def bpe_tokenizer(family: str):
    """A byte-level BPE tokenizer of ``family`` ("qwen" or "pythia") with its special tokens and conventions."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    if family == "qwen":
        core.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = QWEN_SPECIALS
    else:
        core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        specials = ["<|endoftext|>", "<|padding|>"]
    core.decoder = decoders.ByteLevel()
    core.train_from_iterator(corpus(), trainers.BpeTrainer(vocab_size=900, special_tokens=specials,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if family == "qwen":
        return PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                       additional_special_tokens=QWEN_SPECIALS, model_max_length=1 << 17)
    return PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   unk_token="<|endoftext|>", model_max_length=1 << 17)


def _padded(n: int, multiple: int = 64) -> int:
    return -(-n // multiple) * multiple


def save_checkpoint(kind: str, directory: Path) -> Path:
    """A tiny random checkpoint of ``kind`` (a value of :data:`PAPER_CHECKPOINTS`) with its tokenizer or image
    processor, saved as the hub holds it (safetensors)."""
    import torch
    from transformers import (
        CLIPConfig,
        CLIPImageProcessor,
        CLIPModel,
        GPTNeoXConfig,
        GPTNeoXForCausalLM,
        Qwen2Config,
        Qwen2ForCausalLM,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    torch.manual_seed(0)
    if kind == "clip":
        shared = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=64,
                      projection_dim=16)
        model = CLIPModel(CLIPConfig(text_config={**shared, "vocab_size": 300},
                                     vision_config={**shared, "image_size": 32, "patch_size": 8}, projection_dim=16))
        processor = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32})
        model.save_pretrained(directory, safe_serialization=True)
        processor.save_pretrained(directory)
        return directory
    family = "pythia" if kind == "pythia" else "qwen"
    tokenizer = bpe_tokenizer(family)
    ids = dict(pad_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"), eos_token_id=tokenizer.eos_token_id,
               bos_token_id=tokenizer.bos_token_id)
    if kind == "qwen3":
        model = Qwen3ForCausalLM(Qwen3Config(vocab_size=_padded(len(tokenizer)), hidden_size=32, num_hidden_layers=4,
                                             num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                             intermediate_size=64, max_position_embeddings=4096,
                                             tie_word_embeddings=True, **ids))
        tokenizer.chat_template = QWEN25_CHAT_TEMPLATE
    elif kind == "pythia":
        model = GPTNeoXForCausalLM(GPTNeoXConfig(vocab_size=_padded(len(tokenizer)), hidden_size=32,
                                                 num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                                 rotary_pct=0.25, max_position_embeddings=2048,
                                                 tie_word_embeddings=False, **ids))
    elif kind == "qwen2_chat":
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                                             num_attention_heads=2, num_key_value_heads=1, intermediate_size=64,
                                             max_position_embeddings=4096, tie_word_embeddings=True, **ids))
        tokenizer.chat_template = QWEN25_CHAT_TEMPLATE
    else:
        raise ValueError(f"unknown checkpoint kind {kind!r}")
    model.save_pretrained(directory, safe_serialization=True)
    tokenizer.save_pretrained(directory)
    return directory


def place_in_cache(cache: Path, repo_id: str, source: Path, revision: str = "0" * 40) -> Path:
    """``source``'s files as the hub cache holds ``repo_id`` at ``main`` (models--owner--name/snapshots/<rev>)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snapshot = repo / "snapshots" / revision
    shutil.copytree(source, snapshot)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def populate(cache: Path, scratch: Path) -> dict[str, Path]:
    """Every paper checkpoint in ``cache`` under its id; returns each id's snapshot directory."""
    return {repo_id: place_in_cache(cache, repo_id, save_checkpoint(kind, scratch / kind))
            for repo_id, kind in PAPER_CHECKPOINTS.items()}
