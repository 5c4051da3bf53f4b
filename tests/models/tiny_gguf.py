"""A tiny ``LlamaForCausalLM`` written to GGUF the way llama.cpp's converter writes one: llama.cpp's tensor names,
its q/k row permutation (which transformers' GGUF loader undoes), a byte-level BPE vocabulary with its merges and
control tokens, and a chat template; weights in F32 or a block-quantized type. ``reference`` is the model the file
describes: the source model itself for F32, its matrices rounded through the quantized type otherwise."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # ids 0, 1 (bos), 2 (eos), as SmolLM2's
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
TEXT = "Call me Ishmael. Some years ago, never mind how long precisely, I thought I would sail about a little."
HEADS, KV_HEADS, WIDTH, LAYERS, FFN = 4, 2, 64, 2, 128
LAYER_TENSORS = (("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"), ("self_attn.v_proj", "attn_v"),
                 ("self_attn.o_proj", "attn_output"), ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"),
                 ("mlp.down_proj", "ffn_down"), ("input_layernorm", "attn_norm"),
                 ("post_attention_layernorm", "ffn_norm"))


@dataclass
class TinyGGUF:
    path: Path
    reference: "torch.nn.Module"  # the model the file describes (fp32)
    tokens: list[str]


def _vocabulary() -> tuple[list[str], list[str]]:
    """A byte-level BPE learnt on a sentence: its tokens in id order (special first) and its merges."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=list(SPECIAL), show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator([TEXT] * 8, trainer)
    model = json.loads(tokenizer.to_str())["model"]
    tokens = [token for token, _ in sorted(model["vocab"].items(), key=lambda item: item[1])]
    merges = [" ".join(m) if isinstance(m, list) else m for m in model["merges"]]
    return tokens, merges


def _permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's ``permute`` of q/k rows: each head's rotary halves interleaved (convert_hf_to_gguf.py)."""
    return (weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:])
            .swapaxes(1, 2).reshape(weight.shape))


def write_tiny_gguf(path: Path, quantization: str = "F32", seed: int = 0, permute: bool = True) -> TinyGGUF:
    """Write the GGUF file and return it with its reference model. ``quantization``: a ``GGMLQuantizationType``
    name applied to every matrix (norms stay F32, as llama.cpp keeps them); ``permute=False`` writes q/k rows in
    transformers' order, as a wrong converter would."""
    import gguf
    from transformers import LlamaConfig, LlamaForCausalLM

    tokens, merges = _vocabulary()
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=WIDTH, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, intermediate_size=FFN,
                         max_position_embeddings=256, rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # weights large enough that a wrong permutation or a dropped tensor moves every logit
        for name, param in model.named_parameters():
            param.copy_(torch.randn_like(param) * 0.15 if param.ndim > 1 else 1 + 0.3 * torch.rand_like(param))
    qtype = gguf.GGMLQuantizationType[quantization]
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("tiny-llama")
    writer.add_context_length(256)
    writer.add_embedding_length(WIDTH)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(WIDTH // HEADS)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3 if t in SPECIAL else 1 for t in tokens])  # 3: control
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    names.update({f"model.layers.{i}.{hf}.weight": f"blk.{i}.{ours}.weight"
                  for i in range(LAYERS) for hf, ours in LAYER_TENSORS})
    state = model.state_dict()
    with torch.no_grad():
        for hf, ours in names.items():
            weight = state[hf].numpy().astype(np.float32)
            if weight.ndim == 2 and qtype != gguf.GGMLQuantizationType.F32:
                stored = gguf.quants.quantize(weight, qtype)
                state[hf].copy_(torch.from_numpy(gguf.quants.dequantize(stored, qtype).reshape(weight.shape)))
            else:
                stored = weight
            if permute and (".attn_q." in ours or ".attn_k." in ours):
                heads = HEADS if ".attn_q." in ours else KV_HEADS
                # permuting the stored rows permutes whole quantization blocks' rows: the same as permuting first
                stored = _permute(stored, heads)
            writer.add_tensor(ours, stored, raw_dtype=None if stored.dtype == np.float32 else qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return TinyGGUF(path, model, tokens)
