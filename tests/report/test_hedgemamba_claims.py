"""HedgeMamba's claims on hand-made item scores: the clean ablation of attention matching (the same init without stage
1) is the seed's claim, Mamba-in-the-Llama's init one of no seed paper; a control at chance leaves only a win."""
import numpy as np
import pytest

from relin.report.hedgemamba import HedgeMambaSettings, claims
from relin.report.lm_scores import ItemScores, ModelItems
from relin.report.verdicts import CONTRADICTED, NOT_TESTABLE, REPRODUCED

N = 120
FAMILIES = ("mqar", "walk")
SETTINGS = HedgeMambaSettings(teacher="teacher-gpt_neox", mastery=0.8)


def _items(name: str, accuracy: float, nll: float, offset: int = 0) -> ModelItems:
    """``N`` items per family, right on a run from ``offset``; 20 text passages of 10 tokens at ``nll`` nats each."""
    rng = np.random.default_rng(offset)
    right = (np.arange(N) - offset) % N < round(accuracy * N)
    task = np.array([f for f in FAMILIES for _ in range(N)] + ["text"] * 20, dtype=object)
    columns = {"task": task, "length": np.full(len(task), 64.0), "depth": np.zeros(len(task)),
               "needle_distance": np.full(len(task), -1.0),
               "hits": np.r_[np.tile(right, len(FAMILIES)).astype(float), np.zeros(20)],
               "total": np.r_[np.ones(len(FAMILIES) * N), np.zeros(20)],
               "nll": np.r_[np.zeros(len(FAMILIES) * N), 10 * (nll + 0.01 * rng.random(20))],
               "tokens": np.r_[np.zeros(len(FAMILIES) * N), np.full(20, 10.0)]}
    return ModelItems(name, columns, {"mqar": 1 / 64, "walk": 0.0}, f"{name}/items.csv")


def _arm(name: str, accuracy: float, nll: float, seeds: int = 3) -> list[ModelItems]:
    return [_items(name + (f"-s{i}" if i else ""), accuracy, nll, offset=i) for i in range(seeds)]


def _claims(finetune=(0.6, 2.0), controls=None, hedgehog=(0.5, 2.2)):
    controls = controls or {"random": (0.0, 3.0), "no_match": (0.3, 2.4), "hedgehog_only": (0.55, 2.05),
                            "mil": (0.0, 3.2)}
    models = [_items("teacher-gpt_neox", 1.0, 1.8), *_arm("hedgemamba-finetune", *finetune),
              *_arm("hedgemamba-hedgehog", *hedgehog)]
    for control, (accuracy, nll) in controls.items():
        models += _arm(f"hedgemamba-{control}", accuracy, nll, seeds=1 if control == "mil" else 3)
    return {c.claim: c for c in claims(ItemScores(models, resamples=400), SETTINGS, None)}


def test_the_clean_ablation_of_attention_matching_is_the_seeds_claim_and_mil_is_of_no_seed():
    found = _claims()
    matching = found["Attention matching (stage 1) beats the same initialisation without it (φ at identity, same "
                     "budget): perplexity"]
    assert matching.kind == "claim" and matching.verdict.outcome == REPRODUCED, matching.verdict
    mil = [c for name, c in found.items() if "Mamba-in-the-Llama" in name]
    assert len(mil) == 2 and all(c.kind == "beyond" for c in mil)
    assert all(c.verdict.outcome == NOT_TESTABLE and "training seeds per arm" in c.verdict.reason for c in mil)
    assert sum(c.kind == "claim" for c in found.values()) == 7, "stage 2 vs its init, and three controls twice"


def test_a_random_init_at_chance_leaves_only_a_win_to_read():
    found = _claims()
    random = found["The Hedgehog initialisation beats a random-init Mamba at the same budget: task recovery"]
    headroom = next(p for p in random.preconditions if p.what.startswith("headroom"))
    assert headroom.holds and headroom.only_a_win and random.verdict.outcome == REPRODUCED
    lost = _claims(finetune=(0.0, 2.0))["The Hedgehog initialisation beats a random-init Mamba at the same budget: "
                                        "task recovery"]
    assert lost.verdict.outcome == NOT_TESTABLE, "both at chance: nothing to read"


@pytest.mark.parametrize("hedgehog, outcome", [((0.5, 2.2), REPRODUCED), ((0.5, 1.9), CONTRADICTED)])
def test_stage_2_is_judged_against_the_model_it_starts_from(hedgehog, outcome):
    claim = _claims(hedgehog=hedgehog)["Stage 2 improves on its initialisation: perplexity"]
    assert claim.verdict.outcome == outcome, claim.verdict
