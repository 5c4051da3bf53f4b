"""``relin lia-mtr-chat-lm``: the chat LLM the bridges feed. Default: a tiny ``Qwen2ForCausalLM`` trained on the
scenes' text alone, captions and conversations whose image is replaced by its caption, so that, like an
instruct LLM, it already answers in the chat format from a description; with ``lia_mtr.llm.pretrained`` or
``checkpoint`` (a checkpoints row, its directory passed as ``--checkpoint``): that checkpoint and its tokenizer
with ``<image>`` added as a special token (and its embedding row), its own chat template kept."""
from __future__ import annotations

import argparse

from ...config.lia_mtr import LLMConfig
from .._training import Setup, add_output_arguments, run_training
from ._vlm import add_checkpoint_argument, loaded_reference


def config_sections(args: argparse.Namespace) -> dict[str, type]:
    return {"lia_mtr.llm": LLMConfig}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="lia-mtr-synth-vision directory")
    add_checkpoint_argument(parser, "lia_mtr.llm")
    add_output_arguments(parser)


def text_rows(data, tokenizer) -> tuple[list[list[int]], list[list[int]]]:
    """Per training image: its caption (all supervised), its conversation with the caption in place of the
    image, and a one-turn row per yes/no question of every MME category about it (``train.qa``) and per open
    question (``train.open``: the facts the yes/no questions compare, which the LLM learns to look up first),
    asked after the caption as the text-only reference asks (assistant tokens supervised)."""
    from ...models.vlm.chat import encode_chat

    ids, labels = [], []
    user_turn = data.phrasing.user_turn
    none = [[]] * len(data.train["captions"])
    for caption, qa, open_ in zip(data.train["captions"], data.train.get("qa", none), data.train.get("open", none)):
        for item in (*qa, *open_):
            row, lab = encode_chat(tokenizer, [{"role": "user", "content": user_turn(caption, item["question"])},
                                               {"role": "assistant", "content": item["answer"]}])
            ids.append(row)
            labels.append(lab)
    for caption, turns in zip(data.train["captions"], data.train["conversations"]):
        row = tokenizer(caption)["input_ids"] + [tokenizer.eos_token_id]
        ids.append(row)
        labels.append(row)
        messages = [dict(turns[0], content=user_turn(caption, turns[0]["content"])), *turns[1:]]
        row, lab = encode_chat(tokenizer, messages)
        ids.append(row)
        labels.append(lab)
    return ids, labels


def run(args: argparse.Namespace, sections) -> None:
    from ...data.vision.artifact import VisionData
    from ...models.vlm.llm import add_image_token, build_llm
    from ...train.batching import StepBatches
    from ...train.objectives import build_objective

    cfg = sections.get("lia_mtr.llm")
    data = VisionData.load(args.data)
    reference = loaded_reference(cfg, args, "lia_mtr.llm")
    if reference:
        from ...data.tokenizer import load_tokenizer
        from ...errors import InputError
        from ...models.teachers import load_pretrained
        from ...tracking import stage_run
        from .._training import write_outputs

        tokenizer, llm = load_tokenizer(reference), load_pretrained(reference)
        if not tokenizer.chat_template:
            raise InputError(f"lia_mtr.llm: {reference} has no chat template (expected a chat model, e.g. "
                             f"Qwen/Qwen2.5-3B-Instruct)")
        image_id = add_image_token(llm, tokenizer)
        with stage_run("lia-mtr-chat-lm", sections.raw, inputs=[args.data], outputs=[args.out]) as tracker:
            tracker.set_tags({"relin.pretrained": reference})
            write_outputs(args, llm, tokenizer, [], {"steps": 0, "pretrained": reference,
                                                     "image_token_id": image_id}, tracker)
        return

    def setup(env):
        tokenizer = data.tokenizer()
        ids, labels = text_rows(data, tokenizer)
        batches = StepBatches(ids, labels, batch_size=cfg.train.batch_size, pad_id=tokenizer.pad_token_id,
                              seed=cfg.train.seed, curriculum=cfg.train.curriculum,
                              bucket_by_length=cfg.train.bucket_by_length, rank=env.rank, world_size=env.world_size)
        return Setup(build_llm(cfg, tokenizer, seed=cfg.train.seed), tokenizer, build_objective(cfg.objective),
                     batches)

    run_training("lia-mtr-chat-lm", __name__, args, sections, cfg.train, setup, inputs=[args.data])
