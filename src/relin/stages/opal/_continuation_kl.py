"""Per-token KL(teacher ‖ student) on the teacher's own greedy continuations of held-out prompts, beside the exact
match the evaluation scores: how far the student's next-token distribution lies from the teacher's along the
trajectory the teacher generates (issue 48), for the families scored by exact match (the walks, the lists).

Each prompt of the test split is continued greedily by the teacher for as many tokens as its gold answer and eos,
cut after the teacher's first eos; teacher and student then read prompt + continuation teacher-forced, and
KL(p_T ‖ p_S) = Σ_v p_T (log p_T − log p_S) is averaged over every continuation token (its eos included).
OPAL's training stages write it, per family, into their ``train_metrics.json`` (``teacher_continuation_kl``); the
teacher's continuations, the same greedy tokens for every student, are generated once (``relin
opal-teacher-continuations``) and read by each stage.
"""
from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F

from ...devices import model_device


def exact_families() -> tuple[str, ...]:
    from ...eval.tasks import TASKS

    return tuple(task for task, scoring in TASKS.items() if scoring.kind == "exact")


def _need_groups(task: str, chosen: list[dict]) -> dict[int, list[int]]:
    """Indices into ``chosen`` by generation budget (the gold answer's length and eos), shortest first: the batches
    both the generation and the KL read."""
    from ...eval.tasks import TASKS

    budgets = [TASKS[task].budget(r) for r in chosen]
    return {need: [i for i, b in enumerate(budgets) if b == need] for need in sorted(set(budgets))}


def _prompt(row: dict) -> list[int]:
    return list(row["input_ids"][:row["prompt_len"]])


def _by_family(rows: list[dict]) -> dict[str, list[dict]]:
    """The rows of each exact-match family present, in row order."""
    families = {task: [r for r in rows if r["task"] == task] for task in exact_families()}
    return {task: chosen for task, chosen in families.items() if chosen}


@torch.no_grad()
def teacher_continuations(teacher, rows: list[dict], eos_token_id: int, pad_token_id: int,
                          batch_size: int = 32) -> dict[str, list[list[int]]]:
    """Per exact-match family of ``rows``: the teacher's greedy continuation of each row's prompt, in the family's row
    order, generated for as many tokens as its gold answer and eos and cut after the teacher's first eos. One
    generation serves every student measured against this teacher (``relin opal-teacher-continuations``)."""
    from ...eval.generation import continuations, greedy_generator

    out = {}
    for task, chosen in _by_family(rows).items():
        generated: list[list[int]] = [[] for _ in chosen]
        for need, group in _need_groups(task, chosen).items():
            prompts = [_prompt(chosen[i]) for i in group]
            tokens = continuations(greedy_generator(teacher, eos_token_id, pad_token_id), prompts, need,
                                   batch_size, None)
            for i, continuation in zip(group, tokens):
                cut = continuation.index(eos_token_id) + 1 if eos_token_id in continuation else len(continuation)
                generated[i] = list(continuation[:cut])
        out[task] = generated
    return out


@torch.no_grad()
def continuation_kl(teacher, student, rows: list[dict], continued: dict[str, list[list[int]]], pad_token_id: int,
                    batch_size: int = 32) -> dict[str, float]:
    """Per family of ``rows`` scored by exact match: the mean per-token KL(teacher ‖ student) on the teacher's
    greedy continuations ``continued`` of the rows' prompts (:func:`teacher_continuations`; module docstring);
    families without rows are left out."""
    was_training = student.training
    student.eval()
    device = model_device(student)
    out = {}
    for task, chosen in _by_family(rows).items():
        total, count = 0.0, 0
        for group in _need_groups(task, chosen).values():
            sequences = [(_prompt(chosen[i]), continued[task][i]) for i in group]
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


def prompts_digest(rows: list[dict]) -> str:
    """sha256 of the exact-match families' prompts of ``rows`` (family, then each prompt's token ids): what a
    continuations file was generated from."""
    import hashlib

    digest = hashlib.sha256()
    for task, chosen in _by_family(rows).items():
        digest.update(task.encode())
        for r in chosen:
            digest.update(b"|" + ",".join(map(str, _prompt(r))).encode())
    return digest.hexdigest()


def read_continuations(path: str | Path, rows: list[dict], data: str | Path) -> dict[str, list[list[int]]]:
    """The continuations of ``path`` (``relin opal-teacher-continuations``); one line naming the file when they were
    generated from other prompts than ``rows`` (the test split of ``data``)."""
    from ...errors import InputError
    from ...io import read_json

    record = read_json(path, "a teacher_continuations.json of relin opal-teacher-continuations")
    if record.get("prompts_sha256") != prompts_digest(rows):
        raise InputError(f"{path}: continuations of other prompts than the test split of {data} (expected the "
                         f"output of relin opal-teacher-continuations --data {data})")
    return record["families"]


def measured(teacher, student, data: str | Path, tokenizer, continuations: str | Path) -> dict:
    """What an OPAL training stage adds to its ``train_metrics.json``: ``{"teacher_continuation_kl": {family: kl}}``
    on the test split of ``data``, the teacher's continuations read from ``continuations``, or nothing when the split
    has no exact-match family."""
    rows = test_rows(data)
    if not rows:
        return {}
    continued = read_continuations(continuations, rows, data)
    return {"teacher_continuation_kl": continuation_kl(teacher, student, rows, continued, tokenizer.pad_token_id)}
