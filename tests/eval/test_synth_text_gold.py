"""The scorers agree with the data stage: gold continuations of real ``synth_text`` rows score 1."""
import dataclasses
from pathlib import Path

import pytest
import torch

from relin.config.params import load_params
from relin.data.synth_text import build_synth_text
from relin.eval.lm import evaluate_lm

from .helpers import NextTokenOracle

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def smoke_data():
    params = load_params(ROOT / "params.yaml", [ROOT / "workflow" / "configs" / "smoke.yaml"])
    # the tasks' gold answers, in the word tokenizer (the BPE needs the DAG's real-text corpus; the scoring is the same)
    # (niah_text, a needle in the corpus's files, is scored as niah_single is: tests/data/test_niah_text.py)
    data_cfg = dataclasses.replace(params.data, tokenizer="word",
                                   text=dataclasses.replace(params.data.text, train_examples=0),
                                   niah=dataclasses.replace(params.data.niah, families=[
                                       f for f in params.data.niah.families if f != "text"]))
    data, tokenizer = build_synth_text(data_cfg)
    return data["test"], tokenizer, params.eval


def test_gold_answers_of_every_family_score_one(smoke_data):
    rows, tokenizer, cfg = smoke_data
    gold = {tuple(r["input_ids"][:r["prompt_len"]]): r["input_ids"][r["prompt_len"]:] for r in rows}

    def generator(prompts: torch.Tensor, max_new_tokens: int) -> torch.Tensor:
        out = torch.full((prompts.shape[0], max_new_tokens), tokenizer.pad_token_id)
        for i, prompt in enumerate(prompts.tolist()):
            answer = gold[tuple(prompt)][:max_new_tokens]
            out[i, :len(answer)] = torch.tensor(answer)
        return out

    metrics = evaluate_lm(NextTokenOracle(len(tokenizer)), rows, tokenizer, cfg, name="gold",
                          generator=generator).metrics()
    assert set(metrics["accuracy"]) == {"mqar", "niah_single", "niah_multikey", "niah_multiquery", "arithmetic", "walk"}
    assert all(acc == 1.0 for acc in metrics["accuracy"].values()), metrics["accuracy"]
    assert metrics["perplexity"] < 1.001
