"""The chat LLM: a tiny ``Qwen2ForCausalLM`` from :class:`~relin.config.lia_mtr.LLMConfig` (the paper:
Qwen/Qwen2.5-3B-Instruct, the same class), with the chat tokenizer's vocabulary."""
from __future__ import annotations


def build_llm(cfg, tokenizer, seed: int = 0):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=cfg.hidden_size,
                         num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
                         num_key_value_heads=cfg.num_key_value_heads, intermediate_size=cfg.intermediate_size,
                         max_position_embeddings=1024, tie_word_embeddings=True,
                         initializer_range=cfg.initializer_range,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config)


def add_image_token(llm, tokenizer) -> int:
    """Make ``<image>`` one special token of a checkpoint's tokenizer and give it an embedding row: the
    embeddings grow when the vocabulary outgrows them, and the row (input and output) starts at the mean of
    the others, as LLaVA's ``initialize_vision_tokenizer`` does for the tokens it adds. The bridge's outputs
    replace this row's input embedding at every image position; the mean keeps the output logit of
    ``<image>`` ordinary. Returns the token's id."""
    import torch
    from tokenizers import AddedToken

    from .chat import IMAGE

    if IMAGE not in tokenizer.get_vocab():
        tokenizer.add_tokens([AddedToken(IMAGE, special=True, normalized=False)], special_tokens=True)
    image_id = tokenizer.convert_tokens_to_ids(IMAGE)
    rows = llm.get_input_embeddings().weight.shape[0]
    if len(tokenizer) > rows:
        llm.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    with torch.no_grad():
        for embedding in {id(e): e for e in (llm.get_input_embeddings(), llm.get_output_embeddings())
                          if e is not None}.values():
            old = embedding.weight[:min(rows, image_id)]
            embedding.weight[image_id] = old.mean(0)
    return image_id
