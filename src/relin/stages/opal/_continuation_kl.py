"""Per-token KL(teacher ‖ student) on the teacher's own greedy continuations of held-out prompts, beside the exact
match the evaluation scores: how far the student's next-token distribution lies from the teacher's along the
trajectory the teacher generates (issue 48), for the families scored by exact match (the walks, the lists).

Each prompt of the test split is continued greedily by the teacher for as many tokens as its gold answer and eos,
cut after the teacher's first eos; teacher and student then read prompt + continuation teacher-forced, and
KL(p_T ‖ p_S) = Σ_v p_T (log p_T − log p_S) is averaged over every continuation token (its eos included).
OPAL's training stages write it, per family, into their ``train_metrics.json`` (``teacher_continuation_kl``).
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from ...devices import model_device


def exact_families() -> tuple[str, ...]:
    from ...eval.tasks import TASKS

    return tuple(task for task, scoring in TASKS.items() if scoring.kind == "exact")


@torch.no_grad()
def continuation_kl(teacher, student, rows: list[dict], eos_token_id: int, pad_token_id: int,
                    batch_size: int = 32) -> dict[str, float]:
    """Per family of ``rows`` scored by exact match: the mean per-token KL(teacher ‖ student) on the teacher's
    greedy continuations of the rows' prompts (module docstring); families without rows are left out."""
    from ...eval.generation import continuations, greedy_generator
    from ...eval.tasks import TASKS

    was_training = student.training
    student.eval()
    device = model_device(student)
    out = {}
    for task in exact_families():
        chosen = [r for r in rows if r["task"] == task]
        if not chosen:
            continue
        total, count = 0.0, 0
        for need in sorted({TASKS[task].budget(r) for r in chosen}):
            picked = [r for r in chosen if TASKS[task].budget(r) == need]
            prompts = [list(r["input_ids"][:r["prompt_len"]]) for r in picked]
            generated = continuations(greedy_generator(teacher, eos_token_id, pad_token_id), prompts, need,
                                      batch_size, None)
            sequences = []
            for prompt, tokens in zip(prompts, generated):
                cut = tokens.index(eos_token_id) + 1 if eos_token_id in tokens else len(tokens)
                sequences.append((prompt, tokens[:cut]))
            for start in range(0, len(sequences), batch_size):
                kl, n = _kl_sum(teacher, student, sequences[start:start + batch_size], pad_token_id, device)
                total, count = total + kl, count + n
        out[task] = total / max(count, 1)
    student.train(was_training)
    return out


def _kl_sum(teacher, student, sequences: list[tuple[list[int], list[int]]], pad_token_id: int,
            device: torch.device) -> tuple[float, int]:
    """Summed KL(teacher ‖ student) over the continuation tokens of right-padded ``prompt + continuation`` rows,
    and their number."""
    width = max(len(p) + len(c) for p, c in sequences)
    ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    targets = torch.zeros((len(sequences), width), dtype=torch.bool)  # positions whose next token is a continuation
    for row, (prompt, continuation) in enumerate(sequences):
        ids[row, :len(prompt) + len(continuation)] = torch.tensor(prompt + continuation)
        mask[row, :len(prompt) + len(continuation)] = 1
        targets[row, len(prompt) - 1:len(prompt) + len(continuation) - 1] = True
    ids, mask, targets = ids.to(device), mask.to(device), targets.to(device)
    log_p = F.log_softmax(teacher(input_ids=ids, attention_mask=mask).logits.float()[targets], -1)
    log_q = F.log_softmax(student(input_ids=ids, attention_mask=mask).logits.float()[targets], -1)
    return float((log_p.exp() * (log_p - log_q)).sum()), int(targets.sum())


def test_rows(data: str | Path) -> list[dict]:
    """The test split's rows of the exact-match families (task, input_ids, prompt_len, labels); none for data whose
    rows carry no such family (a corpus: its rows have no prompt to continue)."""
    from ...data.loaders import load_split
    from ...eval.data import load_eval_split

    tasks = load_split(data, "test", ("task",))["task"]
    keep = [i for i, task in enumerate(tasks) if task in exact_families()]
    if not keep:
        return []
    split = load_eval_split(data)
    return split.select(keep).select_columns(["task", "input_ids", "prompt_len", "labels"]).to_list()


def measured(teacher, student, data: str | Path, tokenizer) -> dict:
    """What an OPAL training stage adds to its ``train_metrics.json``: ``{"teacher_continuation_kl": {family: kl}}``
    on the test split of ``data``, or nothing when it has no exact-match family."""
    rows = test_rows(data)
    if not rows:
        return {}
    return {"teacher_continuation_kl": continuation_kl(teacher, student, rows, tokenizer.eos_token_id,
                                                       tokenizer.pad_token_id)}
