"""MME scoring exactly as the official ``eval_tool/calculation.py`` (BradyFU/Awesome-Multimodal-Large-Language-
Models; verbatim copy at zjunlp/Deco:eval_tool/calculation.py@a3ccc15), and its results layout.

A results directory holds one ``<subtask>.txt`` per subtask, lines ``img\\tquestion\\tgt\\tpred``, the two
questions of an image on consecutive lines. Per subtask: ``acc`` = correct answers / questions and
``acc_plus`` = images with both answers correct / images, the score = 100·acc + 100·acc_plus (at most 200);
the perception and cognition totals sum their subtasks' scores. A prediction counts as yes/no when its
lowercased text equals "yes"/"no"; otherwise its first four characters are searched for "yes", then "no";
anything else is "other", scored wrong.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

PERCEPTION = ("existence", "count", "position", "color", "posters", "celebrity", "scene", "landmark", "artwork",
              "OCR")
COGNITION = ("commonsense_reasoning", "numerical_calculation", "text_translation", "code_reasoning")


def parse_answer(pred: str) -> str:
    """The official parser: ``yes``, ``no`` or ``other`` from a model's answer."""
    pred = pred.lower()
    if pred in ("yes", "no"):
        return pred
    prefix = pred[:4]
    if "yes" in prefix:
        return "yes"
    if "no" in prefix:
        return "no"
    return "other"


@dataclass(frozen=True)
class MMEAnswer:
    image: str
    question: str
    gt: str
    pred: str


def score_subtask(answers: list[MMEAnswer], task: str = "") -> dict[str, float]:
    """``acc``, ``acc_plus`` (fractions), ``score`` (100·acc + 100·acc_plus), ``questions``, ``images``,
    ``other`` (answers parsed as neither yes nor no). Consecutive pairs must share an image."""
    if not answers or len(answers) % 2:
        raise InputError(f"MME {task}: expected an even, non-zero number of answers (two per image), "
                         f"got {len(answers)}")
    correct = both = other = 0
    for i in range(0, len(answers), 2):
        pair = answers[i:i + 2]
        if pair[0].image != pair[1].image:
            raise InputError(f"MME {task}: lines {i + 1}-{i + 2} belong to different images "
                             f"({pair[0].image}, {pair[1].image}); each image's two questions must be consecutive")
        right = 0
        for answer in pair:
            gt = answer.gt.lower()
            if gt not in ("yes", "no"):
                raise InputError(f"MME {task}: ground truth {answer.gt!r} of {answer.image}: expected yes or no")
            pred = parse_answer(answer.pred)
            other += pred == "other"
            right += pred == gt
        correct += right
        both += right == 2
    acc, acc_plus = correct / len(answers), both / (len(answers) // 2)
    return {"acc": acc, "acc_plus": acc_plus, "score": 100 * acc + 100 * acc_plus, "questions": len(answers),
            "images": len(answers) // 2, "other": other}


# One question as the official tool scores it (``items.csv``): the parsed answer (yes, no, other) and whether it is
# the ground truth; an image's two questions on consecutive rows.
ITEM_COLUMNS = ["phase", "task", "image", "question", "gt", "answer", "correct"]


@dataclass(frozen=True)
class ScoredAnswer:
    image: str
    answer: str
    correct: bool


def scored_items(phase: str, by_task: dict[str, list[MMEAnswer]]) -> list[dict]:
    """Each answer of one phase as the official tool scores it, rows of :data:`ITEM_COLUMNS`."""
    return [{"phase": phase, "task": task, "image": a.image, "question": a.question, "gt": a.gt.lower(),
             "answer": answer, "correct": int(answer == a.gt.lower())}
            for task, answers in by_task.items() for a in answers for answer in (parse_answer(a.pred),)]


def read_items_file(path: str | Path) -> dict[str, dict[str, list[ScoredAnswer]]]:
    """``items.csv`` as ``{phase: {task: [ScoredAnswer]}}``, in file order."""
    import csv

    path = Path(path)
    out: dict[str, dict[str, list[ScoredAnswer]]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        read = ("phase", "task", "image", "answer", "correct")
        if missing := [c for c in read if c not in (reader.fieldnames or [])]:
            raise InputError(f"{path}: no column {missing[0]!r} (expected the columns {', '.join(ITEM_COLUMNS)})")
        for row in reader:
            out.setdefault(row["phase"], {}).setdefault(row["task"], []).append(
                ScoredAnswer(row["image"], row["answer"], row["correct"] == "1"))
    return out


def read_results_file(path: str | Path) -> list[MMEAnswer]:
    """One subtask's ``img\\tquestion\\tgt\\tpred`` lines."""
    path = Path(path)
    answers = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            raise InputError(f"{path}:{n}: expected 4 tab-separated fields img, question, gt, pred; "
                             f"got {len(fields)}")
        answers.append(MMEAnswer(*fields))
    return answers


def write_results_file(path: str | Path, answers: list[MMEAnswer]) -> None:
    """Write a subtask's answers in the official layout (tabs and newlines in predictions become spaces)."""
    from ..io import atomic_write_text

    def clean(text: str) -> str:
        return " ".join(text.replace("\t", " ").splitlines())

    atomic_write_text(path, "".join(f"{a.image}\t{a.question}\t{a.gt}\t{clean(a.pred)}\n" for a in answers))


def score_results_dir(results_dir: str | Path) -> dict:
    """Score every ``<subtask>.txt`` of the official subtasks found in ``results_dir``.

    Returns ``{"subtasks": {task: score_subtask(...)}, "perception": total, "cognition": total,
    "missing": [official subtasks without a file]}``.
    """
    root = Path(results_dir)
    if not root.is_dir():
        raise InputError(f"{root}: no such results directory (expected <subtask>.txt files)")
    subtasks = {task: score_subtask(read_results_file(root / f"{task}.txt"), task)
                for task in (*PERCEPTION, *COGNITION) if (root / f"{task}.txt").is_file()}
    if not subtasks:
        raise InputError(f"{root}: no MME results file (expected e.g. existence.txt, one per subtask)")
    return {"subtasks": subtasks,
            "perception": sum(s["score"] for t, s in subtasks.items() if t in PERCEPTION),
            "cognition": sum(s["score"] for t, s in subtasks.items() if t in COGNITION),
            "missing": [t for t in (*PERCEPTION, *COGNITION) if t not in subtasks]}


def format_scores(scores: dict) -> str:
    """The official tool's printout: per subtask its score, then each total."""
    lines = []
    for kind, tasks in (("Perception", PERCEPTION), ("Cognition", COGNITION)):
        present = [t for t in tasks if t in scores["subtasks"]]
        if not present:
            continue
        lines.append(f"=========== {kind} ===========")
        lines.append(f"total score: {scores[kind.lower()]:.2f}")
        lines.extend(f"\t {t}  score: {scores['subtasks'][t]['score']:.2f}" for t in present)
    return "\n".join(lines)
