"""Multi-step arithmetic word problems whose final answer is one checkable integer.

    tom has 3 apples. he gets 5 more. he gives away 2. how many apples does tom have now? answer: 6

Each step adds or removes a random amount (``1..max_operand``); removals never go below zero.
"""
from __future__ import annotations

import re

import numpy as np

from .rows import answer_row

NAMES = (("tom", "he"), ("ben", "he"), ("sam", "he"), ("leo", "he"), ("max", "he"),
         ("anna", "she"), ("lily", "she"), ("mia", "she"), ("emma", "she"), ("zoe", "she"))
OBJECTS = ("apples", "pears", "coins", "marbles", "stickers", "cards", "shells", "pencils", "stamps", "cookies")
ADD = ("{p} gets {n} more.", "{p} finds {n} more.", "{p} buys {n} more.")
REMOVE = ("{p} gives away {n}.", "{p} loses {n}.", "{p} eats {n}.")
QUESTION = "how many {obj} does {name} have now? answer:"


def arithmetic_words() -> list[str]:
    """Every word the problems emit (for the tokenizer vocabulary)."""
    text = " ".join([*(n for pair in NAMES for n in pair), *OBJECTS, *ADD, *REMOVE, QUESTION, "has"])
    return [w for w in dict.fromkeys(re.sub(r"\{\w+\}|[.,:?]", " ", text).split())]


def problem(steps: int, max_operand: int, rng: np.random.Generator) -> tuple[str, int]:
    """A problem text ending in ``answer:`` and its integer answer."""
    name, pronoun = NAMES[rng.integers(len(NAMES))]
    obj = OBJECTS[rng.integers(len(OBJECTS))]
    count = int(rng.integers(1, max_operand + 1))
    sentences = [f"{name} has {count} {obj}."]
    for _ in range(steps):
        if count > 0 and rng.random() < 0.5:
            amount = int(rng.integers(1, min(count, max_operand) + 1))
            template, count = REMOVE[rng.integers(len(REMOVE))], count - amount
        else:
            amount = int(rng.integers(1, max_operand + 1))
            template, count = ADD[rng.integers(len(ADD))], count + amount
        sentences.append(template.format(p=pronoun, n=amount))
    sentences.append(QUESTION.format(obj=obj, name=name))
    return " ".join(sentences), count


def generate_arithmetic(count: int, steps: list[int], max_operand: int, encoder,
                        rng: np.random.Generator) -> list[dict]:
    """``count`` rows; ``length`` is the token count rounded up to a multiple of 16 (a length bucket)."""
    rows = []
    for _ in range(count):
        text, answer = problem(int(steps[rng.integers(len(steps))]), max_operand, rng)
        prompt, answer_ids = encoder.ids(text), encoder.ids(str(answer))
        tokens = len(prompt) + len(answer_ids) + 2
        rows.append(answer_row("arithmetic", encoder.bos, encoder.eos, prompt, answer_ids, answer=str(answer),
                               answers=[str(answer)], length=-(-tokens // 16) * 16))
    return rows


def parse_answer(text: str) -> int | None:
    """The integer a model answered: the first number after the last ``answer:`` (or in the text)."""
    tail = text.rsplit("answer:", 1)[-1]
    match = re.search(r"-?\d+", tail)
    return int(match.group()) if match else None
