"""Answering the MME-style set: a VLM from the image's features, or the chat LLM alone from the scene's caption
in text (the text-only reference: what the LLM can answer when the image reaches it perfectly), both greedy
in the chat format; answers are written and scored in the official layout (:mod:`relin.eval.mme`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch

from ..devices import model_device
from ..logs import progress
from .mme import MMEAnswer, score_results_dir, write_results_file

# The yes/no answer is one word and the end of turn; a few tokens more leave room for a verbose model.
ANSWER_TOKENS = 4


def answer_with_images(model, tokenizer, questions: list[dict], features: torch.Tensor, batch_size: int,
                       max_new_tokens: int = ANSWER_TOKENS) -> list[str]:
    """Greedy answers of a :class:`~relin.models.vlm.model.BridgeVLM` to ``questions`` (dicts with ``question``
    and ``index``, the row of the image in ``features [N, P, D]``)."""
    from ..models.vlm.chat import IMAGE, encode_prompt, expand_image_tokens
    from ..train.sources import pad_rows

    image_id = tokenizer.convert_tokens_to_ids(IMAGE)
    device = model_device(model)
    preds = []
    model.eval()
    for lo in progress(range(0, len(questions), batch_size), desc="mme"):
        chunk = questions[lo:lo + batch_size]
        rows = [expand_image_tokens(ids, ids, image_id, features.shape[1])[0] for ids in
                (encode_prompt(tokenizer, [{"role": "user", "content": f"{IMAGE} {q['question']}"}]) for q in chunk)]
        batch = pad_rows(rows, rows, tokenizer.pad_token_id, left=True)
        index = torch.tensor([q["index"] for q in chunk])
        out = model.generate(batch["input_ids"].to(device), batch["attention_mask"].to(device),
                             features[index].to(device), max_new_tokens, tokenizer.eos_token_id)
        preds += [tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in out]
    return preds


def answer_from_captions(llm, tokenizer, questions: list[dict], captions: list[str], batch_size: int,
                         user_turn: Callable[[str, str], str], max_new_tokens: int = ANSWER_TOKENS) -> list[str]:
    """Greedy answers of the chat LLM given each question's image as its caption in text (``captions[index]``),
    ``user_turn(caption, question)`` the user's message (the data's phrasing: what the tiny chat LLM was trained
    on)."""
    from ..models.generation import generate
    from ..models.vlm.chat import encode_prompt
    from ..train.sources import pad_rows

    device = model_device(llm)
    preds = []
    llm.eval()
    for lo in progress(range(0, len(questions), batch_size), desc="mme text"):
        chunk = questions[lo:lo + batch_size]
        rows = [encode_prompt(tokenizer, [{"role": "user", "content": user_turn(captions[q["index"]], q["question"])}])
                for q in chunk]
        batch = pad_rows(rows, rows, tokenizer.pad_token_id, left=True)
        out = generate(llm, batch["input_ids"].to(device), max_new_tokens,
                       attention_mask=batch["attention_mask"].to(device), eos_token_id=tokenizer.eos_token_id,
                       pad_token_id=tokenizer.pad_token_id)
        preds += [tokenizer.decode(ids, skip_special_tokens=True).strip() for ids in out.tolist()]
    return preds


def write_and_score(directory: Path, questions: list[dict], preds: list[str]) -> tuple[dict, list[dict]]:
    """Write one phase's answers in the official layout under ``directory`` (named after the phase) and return its
    metrics (the perception total and, per subtask and overall, accuracy and acc+ in percent, and the share of "yes")
    and each answer as scored (:func:`relin.eval.mme.scored_items`, what the report reads)."""
    from .mme import parse_answer, scored_items

    directory.mkdir(parents=True, exist_ok=True)
    by_task: dict[str, list[MMEAnswer]] = {}
    for q, pred in zip(questions, preds):
        by_task.setdefault(q["task"], []).append(MMEAnswer(q["image"], q["question"], q["answer"], pred))
    for task, answers in by_task.items():
        write_results_file(directory / f"{task}.txt", answers)
    scores = score_results_dir(directory)
    tasks = {task: {"acc": round(100 * s["acc"], 2), "acc_plus": round(100 * s["acc_plus"], 2),
                    "score": round(s["score"], 2), "other": s["other"]} for task, s in scores["subtasks"].items()}
    questions_n = sum(s["questions"] for s in scores["subtasks"].values())
    correct = sum(s["acc"] * s["questions"] for s in scores["subtasks"].values())
    yes = sum(parse_answer(p) == "yes" for p in preds)
    metrics = {"perception": round(scores["perception"], 2), "accuracy": round(100 * correct / questions_n, 2),
               "yes_share": round(100 * yes / len(preds), 2), "tasks": tasks}
    return metrics, scored_items(directory.name, by_task)
