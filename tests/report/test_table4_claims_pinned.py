"""OPAL's Table 4 claims (the hybrid recovers the teacher's NIAH retrieval; SWA collapses beyond its stacked reach)
pinned on hand-made item scores: every field a report shows and each claim's place in the section's list equal the
record in ``data/table4_claims.json``, which the hand-built claims of ``relin.report.opal`` wrote before they became
claim rows. A change to how they are judged shows here."""
import dataclasses
import json
from pathlib import Path

import pytest

from relin.report import opal
from relin.report.lm_scores import ItemScores

from .pins import shown_fields
from .test_opal_verdicts import LAYERS, SETTINGS, STRONG, _items

PINNED = Path(__file__).parent / "data" / "table4_claims.json"
WEAK = {"niah_single": 0.2, "niah_multikey": 0.1, "niah_multiquery": 0.15, "arithmetic": 0.9}


def scenarios() -> dict:
    """Name -> (settings, the conversion's layer record, {model: per-family accuracy})."""
    both = {"teacher-qwen3": STRONG, "opal-onpolicy": STRONG, "opal-swa": WEAK}
    return {
        "recovers, SWA collapses": (SETTINGS, LAYERS, both),
        "no layer record": (SETTINGS, None, both),
        "one kept layer": (SETTINGS, {**LAYERS, "kept": [7]}, both),
        "SWA in the hybrid layout": (dataclasses.replace(SETTINGS, swa_layout="hybrid"), LAYERS, both),
        "teacher trained on a needle family": (dataclasses.replace(SETTINGS, teacher_trained=("niah_single",)),
                                               LAYERS, both),
        "needles trained": (dataclasses.replace(SETTINGS, niah_protocol="mixed"), LAYERS, both),
        "teacher masters no needle": (SETTINGS, LAYERS, {"teacher-qwen3": WEAK, "opal-onpolicy": WEAK,
                                                         "opal-swa": WEAK}),
        "student learned nothing": (SETTINGS, LAYERS, {"teacher-qwen3": STRONG, "opal-onpolicy": {},
                                                       "opal-swa": STRONG}),
        "half way": (SETTINGS, LAYERS, {"teacher-qwen3": STRONG, "opal-onpolicy": {**STRONG, "niah_single": 0.8,
                                                                                   "niah_multikey": 0.85},
                                        "opal-swa": {**STRONG, "niah_single": 0.1}}),
        "SWA only": (SETTINGS, LAYERS, {"teacher-qwen3": STRONG, "opal-swa": WEAK}),
    }


def shown(settings, layers, models) -> list[dict]:
    scores = ItemScores([_items(name, accuracy, seed=i) for i, (name, accuracy) in enumerate(models.items())],
                        resamples=300)
    found = opal.claims(scores, settings, None, layers=layers)
    return [shown_fields(c, at=i) for i, c in enumerate(found)
            if "NIAH retrieval" in c.claim or "SWA collapses" in c.claim]


@pytest.mark.parametrize("name", list(scenarios()))
def test_table_4_claims_read_as_pinned(name):
    assert shown(*scenarios()[name]) == json.loads(PINNED.read_text())[name]


if __name__ == "__main__":
    PINNED.write_text(json.dumps({name: shown(*s) for name, s in scenarios().items()}, indent=1, ensure_ascii=False)
                      + "\n")
