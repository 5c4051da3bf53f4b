"""The chat format of the tiny VLM: the project's word tokenizer with ChatML special tokens and a chat
template whose assistant turns are marked ``{% generation %}``, so ``apply_chat_template(...,
return_assistant_tokens_mask=True)`` yields the supervised tokens (LLaVA's ``preprocess_mpt`` for ChatML:
assistant content and its ``<|im_end|>``; system and user turns masked).

Each image is one ``<image>`` placeholder in the user's text, expanded to the N patch positions whose
embeddings the bridge supplies (:func:`expand_image_tokens`).
"""
from __future__ import annotations

from typing import Iterable

from ...artifacts import IGNORE_INDEX

IM_START, IM_END, IMAGE = "<|im_start|>", "<|im_end|>", "<image>"
# Word-level tokens have no newline: a space separates the role from its content; the assistant's space
# sits inside its turn so that a generation prompt ends on the role word, as training rows continue it.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}"
    "<|im_start|>assistant{% generation %} {{ message['content'] }}<|im_end|>{% endgeneration %}"
    "{%- else -%}<|im_start|>{{ message['role'] }} {{ message['content'] }}<|im_end|>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{%- endif -%}")


def build_chat_tokenizer(words: Iterable[str]):
    """The project's word tokenizer over ``words`` plus ``<|im_start|>``, ``<|im_end|>``, ``<image>`` and the
    chat template; ``<|im_end|>`` is the end-of-turn (eos) token."""
    from ...data.tokenizer import build_tokenizer

    tokenizer = build_tokenizer("word", words)
    tokenizer.add_special_tokens({"additional_special_tokens": [IM_START, IM_END, IMAGE]})
    tokenizer.eos_token = IM_END
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def encode_chat(tokenizer, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of a conversation: labels hold the assistant tokens only (else -100)."""
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
    if not any(mask):
        raise ValueError("conversation has no assistant tokens (the chat template lacks {% generation %} marks?)")
    return ids, [i if m else IGNORE_INDEX for i, m in zip(ids, mask)]


def encode_prompt(tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """Ids of ``messages`` followed by the assistant's opening (for generation)."""
    return list(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                              return_dict=True)["input_ids"])


def encode_caption(tokenizer, text: str) -> tuple[list[int], list[int]]:
    """LLaVA's ``plain`` format: ``<image>`` then the caption and ``<|im_end|>``; only the caption and the
    end token are supervised."""
    image = tokenizer.convert_tokens_to_ids(IMAGE)
    words = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.convert_tokens_to_ids(IM_END)]
    return [image, *words], [IGNORE_INDEX, *words]


def expand_image_tokens(ids: list[int], labels: list[int], image_id: int, num_patches: int
                        ) -> tuple[list[int], list[int]]:
    """Replace the one ``<image>`` id by ``num_patches`` of them (labels -100 there)."""
    if ids.count(image_id) != 1:
        raise ValueError(f"expected one <image> token per example, got {ids.count(image_id)}")
    at = ids.index(image_id)
    return (ids[:at] + [image_id] * num_patches + ids[at + 1:],
            labels[:at] + [IGNORE_INDEX] * num_patches + labels[at + 1:])
