"""The chat format of the VLM. The tiny LLM trained in the DAG uses the project's word tokenizer with ChatML
special tokens and a chat template whose assistant turns are marked ``{% generation %}``, so
``apply_chat_template(..., return_assistant_tokens_mask=True)`` yields the supervised tokens (LLaVA's
``preprocess_mpt`` for ChatML: assistant content and its ``<|im_end|>``; system and user turns masked). A
checkpoint's chat LLM keeps its own template; when that has no generation marks (Qwen2.5's has none) the
assistant tokens are what each assistant turn adds after the template's generation prompt (LLaVA's
``preprocess_qwen``: the role header masked, the content and the end of turn supervised).

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


def has_generation_marks(template: str | None) -> bool:
    """Whether a chat template marks assistant turns with ``{% generation %}`` (needed for transformers'
    ``return_assistant_tokens_mask``)."""
    import re

    return bool(template) and re.search(r"{%-?\s*generation\s*-?%}", template) is not None


def encode_chat(tokenizer, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """``(input_ids, labels)`` of a conversation: labels hold the assistant tokens only (else -100)."""
    if not has_generation_marks(tokenizer.chat_template):
        return _encode_chat_by_prefix(tokenizer, messages)
    out = tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = list(out["input_ids"]), list(out["assistant_masks"])
    if not any(mask):
        raise ValueError("conversation has no assistant tokens (the chat template lacks {% generation %} marks?)")
    return ids, [i if m else IGNORE_INDEX for i, m in zip(ids, mask)]


def _render(tokenizer, messages: list[dict[str, str]], generation_prompt: bool) -> list[int]:
    return list(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=generation_prompt,
                                              return_dict=True)["input_ids"])


def _encode_chat_by_prefix(tokenizer, messages: list[dict[str, str]]) -> tuple[list[int], list[int]]:
    """Assistant tokens of a template without generation marks: for each assistant turn, the ids the full
    conversation up to it adds to the conversation before it with the generation prompt. Needs a template
    whose renderings extend each other (true of ChatML templates such as Qwen2.5's)."""
    from ...errors import InputError

    ids = _render(tokenizer, messages, False)
    labels = [IGNORE_INDEX] * len(ids)
    for turn, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        prompt = _render(tokenizer, messages[:turn], True)
        start, end = len(prompt), len(_render(tokenizer, messages[:turn + 1], False))
        if prompt != ids[:start] or end > len(ids):
            raise InputError(f"tokenizer {tokenizer.name_or_path}: its chat template renders a conversation "
                             f"differently from its prefixes and has no {{% generation %}} marks, so the assistant "
                             f"tokens cannot be found (expected a template with generation marks)")
        labels[start:end] = ids[start:end]
    if all(label == IGNORE_INDEX for label in labels):
        raise ValueError("conversation has no assistant tokens")
    return ids, labels


def encode_prompt(tokenizer, messages: list[dict[str, str]]) -> list[int]:
    """Ids of ``messages`` followed by the assistant's opening (for generation)."""
    return list(tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True,
                                              return_dict=True)["input_ids"])


def encode_caption(tokenizer, text: str) -> tuple[list[int], list[int]]:
    """LLaVA's ``plain`` format: ``<image>`` then the caption and the end of turn (eos: ``<|im_end|>`` for a
    ChatML LLM); only the caption and the end token are supervised."""
    image = tokenizer.convert_tokens_to_ids(IMAGE)
    words = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return [image, *words], [IGNORE_INDEX, *words]


def expand_image_tokens(ids: list[int], labels: list[int], image_id: int, num_patches: int
                        ) -> tuple[list[int], list[int]]:
    """Replace the one ``<image>`` id by ``num_patches`` of them (labels -100 there)."""
    if ids.count(image_id) != 1:
        raise ValueError(f"expected one <image> token per example, got {ids.count(image_id)}")
    at = ids.index(image_id)
    return (ids[:at] + [image_id] * num_patches + ids[at + 1:],
            labels[:at] + [IGNORE_INDEX] * num_patches + labels[at + 1:])
