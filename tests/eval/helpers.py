"""Contract rows of every task family and fake models with known outputs, for evaluation tests."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from relin.data.rows import IGNORE_INDEX, answer_row, row
from relin.eval.tasks import TASKS

WORDS = ["the", "dog", "cat", "sees", "magic", "number", "for", "is", "what", "ka", "kb", "kc", "va", "vb",
         "vc", "plus", "and", "equals", "answer", "more"]


def niah_row(encoder, task: str, values: list[str], *, filler: int, depth: float) -> dict:
    """``... magic number for ka is V1, V2 ... what is the number for ka ?`` -> ``V1, V2``, the needle at
    ``depth`` of ``filler`` five-word sentences."""
    haystack = ["the", "dog", "sees", "the", "cat"] * filler
    cut = int(depth * len(haystack))
    needle = ["magic", "number", "for", "ka", "is", *values]
    question = ["what", "is", "the", "number", "for", "ka", "?"]
    prompt = encoder.ids(haystack[:cut] + needle + haystack[cut:] + question)
    answer = ", ".join(values)
    return answer_row(task, encoder.bos, encoder.eos, prompt, encoder.ids(answer), answer=answer,
                      answers=values, length=len(prompt) + 1, depth=depth)


def arithmetic_row(encoder, a: int, b: int) -> dict:
    prompt = encoder.ids(f"{a} plus {b} equals")
    return answer_row("arithmetic", encoder.bos, encoder.eos, prompt, encoder.ids(str(a + b)),
                      answer=str(a + b), answers=[str(a + b)], length=len(prompt) + 1)


def mqar_row(encoder, pairs: list[tuple[str, str]], queries: list[int]) -> dict:
    """Key-value ``pairs``, then the keys of ``queries`` each followed by its (supervised) value."""
    input_ids, labels = [encoder.bos], [IGNORE_INDEX]
    for key, value in pairs:
        input_ids += encoder.ids([key, value])
        labels += [IGNORE_INDEX, IGNORE_INDEX]
    for q in queries:
        key, value = pairs[q]
        input_ids += encoder.ids([key, value])
        labels += [IGNORE_INDEX, *encoder.ids([value])]
    answers = [pairs[q][1] for q in queries]
    return row("mqar", input_ids, labels, answer=" ".join(answers), answers=answers, length=len(input_ids),
               num_pairs=len(pairs))


def filler_row(encoder, words: int, rng: torch.Generator) -> dict:
    pool = ["the", "dog", "cat", "sees"]
    text = [pool[int(i)] for i in torch.randint(len(pool), (words,), generator=rng)]
    ids = [encoder.bos, *encoder.ids(text)]
    return row("filler", ids, [IGNORE_INDEX, *ids[1:]], length=len(ids))


def all_family_rows(encoder, rng: torch.Generator) -> list[dict]:
    """NIAH at two lengths and two depths, arithmetic, MQAR of two lengths, filler of two lengths."""
    out = []
    for filler in (2, 4):
        for depth in (0.0, 1.0):
            out.append(niah_row(encoder, "niah_single", ["1234"], filler=filler, depth=depth))
            out.append(niah_row(encoder, "niah_multiquery", ["12", "345"], filler=filler, depth=depth))
    out += [arithmetic_row(encoder, a, b) for a, b in ((3, 4), (12, 9), (7, 0))]
    out += [mqar_row(encoder, [("ka", "va"), ("kb", "vb"), ("kc", "vc")], [2, 0]),
            mqar_row(encoder, [("kb", "vc"), ("ka", "vb")], [1, 0, 1])]
    out += [filler_row(encoder, n, rng) for n in (6, 6, 11)]
    return out


class NextTokenOracle(torch.nn.Module):
    """Predicts the true next token by peeking at ``input_ids[t + 1]`` (teacher forcing only)."""

    def __init__(self, vocab_size: int, confidence: float = 30.0):
        super().__init__()
        self.vocab_size, self.confidence = vocab_size, confidence

    def forward(self, input_ids: torch.Tensor, **_) -> SimpleNamespace:
        nxt = torch.cat([input_ids[:, 1:], input_ids[:, -1:]], dim=1)
        return SimpleNamespace(logits=self.confidence * torch.nn.functional.one_hot(nxt, self.vocab_size).float())


class LogitsModel(torch.nn.Module):
    """Logits ``make(B, T, V)`` whatever the input: ``torch.zeros`` predicts uniformly (probability
    ``1 / V`` per token), ``torch.randn`` at random."""

    def __init__(self, vocab_size: int, make=torch.zeros):
        super().__init__()
        self.vocab_size, self.make = vocab_size, make

    def forward(self, input_ids: torch.Tensor, **_) -> SimpleNamespace:
        return SimpleNamespace(logits=self.make(*input_ids.shape, self.vocab_size))


def answer_generator(rows: list[dict], encoder, text=lambda r: r["answer"]):
    """A generator that continues each generation prompt of ``rows`` with the tokens of ``text(row)``, then eos."""
    replies = {tuple(r["input_ids"][:r["prompt_len"]]): encoder.ids(text(r))
               for r in rows if r["task"] in TASKS and TASKS[r["task"]].kind == "generate"}

    def run(prompts: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        out = torch.full((prompts.shape[0], max_new_tokens), encoder.eos)
        for i, prompt in enumerate(prompts.tolist()):
            tokens = replies[tuple(prompt)][:max_new_tokens]
            out[i, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        return out

    return run
