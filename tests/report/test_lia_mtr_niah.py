"""The bridge NIAH's readings: the weight a needle keeps under LIA-MTR's fixed decays (eqs. 3-5) against a direct
simulation of the recurrence, and the report's tables telling 'did not learn', 'cannot carry' and 'impossible
under eqs. 3-5' apart."""
import math

import numpy as np
import pytest

from relin.eval.bridge_niah import niah_batch
from relin.eval.retention_limit import FP32_RESOLUTION, needle_distance, retention_grid
from relin.report.lia_mtr import niah_table, retention_table


@pytest.mark.parametrize("length, depth", [(16, 0.0), (64, 0.5), (1024, 0.25), (1024, 1.0)])
def test_the_needle_weight_is_the_recurrence_applied_from_its_position(length, depth):
    """Write 1 at the needle's position of a generated sequence, 0 elsewhere, run M_t = λ M_{t-1} + w_t to the
    query: M equals the grid's retained weight, and the distance is the query's index minus the needle's."""
    from relin.config.lia_mtr import BridgeNIAHConfig

    pairs, _ = niah_batch(np.random.default_rng(0), BridgeNIAHConfig(), 1, length, depth)
    keys = pairs[0, :, 0].numpy()
    needle = int(np.flatnonzero(keys[:-1] == keys[-1])[0])
    lam, state = 0.995, 0.0
    for t in range(length):
        state = lam * state + (1.0 if t == needle else 0.0)
    (cell,) = retention_grid(lam, [length], [depth])
    assert cell["distance"] == needle_distance(length, depth) == length - 1 - needle
    assert cell["retained"] == pytest.approx(state, rel=1e-9)
    assert cell["gate_logit_margin"] == pytest.approx(-math.log(state), abs=1e-3)
    assert cell["impossible"] == (state < FP32_RESOLUTION)


def test_the_papers_slowest_decay_makes_a_4k_needle_impossible_and_a_short_one_possible():
    cells = {(c["length"], c["depth"]): c for c in retention_grid(0.995, [64, 4096], [0.0, 1.0])}
    assert not cells[(64, 0.0)]["impossible"] and cells[(64, 0.0)]["retained"] > 0.7
    assert cells[(4096, 0.0)]["impossible"] and cells[(4096, 0.0)]["retained"] < 1e-8
    assert not cells[(4096, 1.0)]["impossible"]                 # the needle just before the query


def _items(accuracy: dict[int, float], depths=(0.0, 1.0), n=40):
    rows = []
    for length, acc in accuracy.items():
        for depth in depths:
            rows += [{"length": length, "depth": depth, "correct": int(i < acc * n)} for i in range(n)]
    return rows


def test_the_niah_table_tells_not_learned_from_cannot_carry_from_carries():
    chance = 1 / 8
    floor = math.log(8)
    data = {"niah_items": {"mha": _items({16: 1.0, 1024: 1.0}), "linear_attn": _items({16: 0.95, 1024: 0.2}),
                           "lia_mtr": _items({16: 0.1, 1024: 0.1})},
            "niah_metrics": {b: {"chance": chance, "trained_lengths": [8, 16]} for b in ("mha", "linear_attn",
                                                                                        "lia_mtr")},
            "niah_history": {"mha": [{"step": 1, "loss": 0.01}], "linear_attn": [{"step": 1, "loss": 0.3}],
                             "lia_mtr": [{"step": 1, "loss": 0.99 * floor}]}}
    readings = {row[0]: row[-1] for row in niah_table(data).rows}
    assert readings == {"mha": "carries the needle to 1024", "linear_attn": "learned at ≤ 16, loses the needle by 1024",
                        "lia_mtr": "did not learn (loss at chance)"}


def test_the_retention_table_separates_impossible_cells_from_unlearned_ones():
    cells = retention_grid(0.995, [16, 8192], [0.0, 1.0])
    data = {"niah_items": {"lia_mtr": _items({16: 0.1, 8192: 0.1})},
            "niah_metrics": {"lia_mtr": {"chance": 0.125, "retention": {"slowest_decay": 0.995, "cells": cells}}}}
    table = retention_table(data)
    assert [row[5] for row in table.rows] == ["allowed", "allowed", "impossible", "allowed"]
    assert table.note.startswith("Under eqs. 3-5 with λ_max = 0.995, 1 of 4 cells keep less than 2^-23")
    assert "In the 3 cells the decays allow, LIA-MTR stays below 0.9" in table.note
