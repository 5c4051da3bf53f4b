"""Readers of the real data formats the paper config uses: MME question files and LLaVA-format JSON.

- MME: one ``<subtask>.txt`` per subtask with lines ``img\\tquestion\\tgt`` (the official ``eval_tool``
  template), two questions per image on consecutive lines, gt yes/no.
- LLaVA (``llava_v1_5_mix665k.json``, ``blip_laion_cc_sbu_558k.json``): a list of
  ``{"id", "image", "conversations": [{"from": "human"|"gpt", "value": ...}, ...]}``; the first human turn
  holds the ``<image>`` placeholder.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...errors import InputError

IMAGE_PLACEHOLDER = "<image>"
ROLES = {"human": "user", "gpt": "assistant"}


@dataclass(frozen=True)
class MMEQuestion:
    task: str
    image: str
    question: str
    answer: str


def load_mme_questions(root: str | Path, tasks: list[str] | None = None) -> list[MMEQuestion]:
    """The questions of every ``<subtask>.txt`` under ``root`` (or only ``tasks``), in file order."""
    root = Path(root)
    files = sorted(root.glob("*.txt")) if tasks is None else [root / f"{t}.txt" for t in tasks]
    if not files:
        raise InputError(f"{root}: no MME question files (expected <subtask>.txt with img<TAB>question<TAB>gt)")
    questions = []
    for path in files:
        if not path.is_file():
            raise InputError(f"{path}: MME subtask file not found")
        rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        for n, row in enumerate(rows, start=1):
            if len(row) < 3 or row[2].strip().lower() not in ("yes", "no"):
                raise InputError(f"{path}:{n}: expected img<TAB>question<TAB>yes|no")
        if len(rows) % 2 or any(rows[i][0] != rows[i + 1][0] for i in range(0, len(rows), 2)):
            raise InputError(f"{path}: expected two questions per image on consecutive lines")
        questions += [MMEQuestion(path.stem, r[0], r[1], r[2].strip().lower()) for r in rows]
    return questions


@dataclass(frozen=True)
class Conversation:
    """One LLaVA sample: its image (relative path or empty) and turns ``(role, text)`` with role user or
    assistant, alternating from the user; the placeholder is removed from the text."""

    id: str
    image: str
    turns: tuple[tuple[str, str], ...]


def load_llava_json(path: str | Path) -> list[Conversation]:
    """LLaVA-format conversations, checked: roles human/gpt alternating from human, ``<image>`` once."""
    path = Path(path)
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{path}: LLaVA JSON not found") from None
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    if not isinstance(records, list):
        raise InputError(f"{path}: expected a JSON list of samples")
    out = []
    for i, record in enumerate(records):
        where = f"{path}: sample {i} ({record.get('id', '?') if isinstance(record, dict) else '?'})"
        turns = record.get("conversations") if isinstance(record, dict) else None
        if not turns or not isinstance(turns, list):
            raise InputError(f"{where}: expected a non-empty 'conversations' list")
        parsed, placeholders = [], 0
        for j, turn in enumerate(turns):
            role = ROLES.get(turn.get("from")) if isinstance(turn, dict) else None
            if role is None or not isinstance(turn.get("value"), str):
                raise InputError(f"{where}: turn {j}: expected {{'from': 'human'|'gpt', 'value': text}}")
            if role != ("user" if j % 2 == 0 else "assistant"):
                raise InputError(f"{where}: turn {j}: roles must alternate human, gpt, ... (got {turn['from']})")
            placeholders += turn["value"].count(IMAGE_PLACEHOLDER)
            parsed.append((role, turn["value"].replace(IMAGE_PLACEHOLDER, "").strip()))
        image = str(record.get("image", ""))
        if placeholders != (1 if image else 0):
            raise InputError(f"{where}: expected {'one' if image else 'no'} {IMAGE_PLACEHOLDER} placeholder, "
                             f"got {placeholders}")
        out.append(Conversation(str(record.get("id", i)), image, tuple(parsed)))
    return out


IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def load_mme_release(root: str | Path) -> list[MMEQuestion]:
    """The questions of the MME benchmark as released (``MME_Benchmark_release_version/``): one folder per
    subtask holding, per image, a ``.txt`` of two ``question<TAB>yes|no`` lines with the same stem, either beside
    the images or in ``images/`` and ``questions_answers_YN/``. ``image`` is the path relative to ``root``."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: MME folder not found (expected MME_Benchmark_release_version/ with one folder "
                         f"per subtask)")
    questions = []
    for task in sorted(p for p in root.iterdir() if p.is_dir()):
        split = (task / "images").is_dir() and (task / "questions_answers_YN").is_dir()
        image_dir, text_dir = (task / "images", task / "questions_answers_YN") if split else (task, task)
        images = {p.stem: p for p in image_dir.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES}
        for text in sorted(text_dir.glob("*.txt")):
            if text.stem not in images:
                raise InputError(f"{text}: no image {text.stem}{{{','.join(IMAGE_SUFFIXES)}}} beside it")
            rows = [line.split("\t") for line in text.read_text(encoding="utf-8").splitlines() if line.strip()]
            if len(rows) != 2 or any(len(r) < 2 or r[1].strip().lower() not in ("yes", "no") for r in rows):
                raise InputError(f"{text}: expected two lines question<TAB>yes|no")
            image = str(images[text.stem].relative_to(root))
            questions += [MMEQuestion(task.name, image, r[0].strip(), r[1].strip().lower()) for r in rows]
    if not questions:
        raise InputError(f"{root}: no MME questions found (expected <subtask>/<image>.txt beside the images, or "
                         f"<subtask>/images/ and <subtask>/questions_answers_YN/)")
    return questions
