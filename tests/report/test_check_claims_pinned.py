"""OPAL's decode-cache check and HedgeMamba's exact-initialisation check pinned on hand-made stage outputs: every field
a report shows equals the record in ``data/check_claims.json``, which the hand-built checks of ``relin.report.opal``
and ``relin.report.hedgemamba`` wrote before they became claim rows. A change to how they are judged shows here."""
import json
from pathlib import Path

import pytest

from relin.report import hedgemamba, opal
from relin.report.inputs import NamedRows
from relin.report.lm_scores import ItemScores

from .pins import shown_fields
from .test_hedgemamba_claims import SETTINGS as HEDGEMAMBA
from .test_hedgemamba_claims import _items as hedgemamba_items
from .test_opal_verdicts import LAYERS, STRONG
from .test_opal_verdicts import SETTINGS as OPAL
from .test_opal_verdicts import _items as opal_items

PINNED = Path(__file__).parent / "data" / "check_claims.json"


def _speed(share: float | None, models=("teacher", "hybrid")) -> NamedRows:
    rows = [{"model": m, "context": n, "cache_bytes": (share if m == "hybrid" else 1.0) * 1000 * n, "tokens_per_s": 9.0}
            for n in (128, 512) for m in models]
    return NamedRows("speed", rows, Path("speed.csv"))


def scenarios() -> dict:
    return {"opal: no speed": ("opal", None), "opal: a quarter": ("opal", _speed(0.25)),
            "opal: half": ("opal", _speed(0.5)), "opal: 0.7": ("opal", _speed(0.7)),
            "opal: no hybrid": ("opal", _speed(0.3, ("teacher",))),
            "hedgemamba: no init": ("hedgemamba", None),
            "hedgemamba: exact": ("hedgemamba", {"max_abs_logit_diff": 3.2e-6, "max_abs_logit": 12.34}),
            "hedgemamba: off": ("hedgemamba", {"max_abs_logit_diff": 2e-3, "max_abs_logit": 7.0})}


def shown(paper: str, output) -> list[dict]:
    if paper == "opal":
        scores = ItemScores([opal_items("teacher-qwen3", STRONG), opal_items("opal-onpolicy", STRONG)], resamples=200)
        found = opal.claims(scores, OPAL, output, layers=LAYERS)
    else:
        scores = ItemScores([hedgemamba_items("teacher-gpt_neox", 1.0, 1.8),
                             hedgemamba_items("hedgemamba-finetune", 0.6, 2.0)], resamples=200)
        found = hedgemamba.claims(scores, HEDGEMAMBA, output)
    return [shown_fields(c, at=i) for i, c in enumerate(found)
            if "decode cache" in c.claim or "initialised from Hedgehog" in c.claim]


@pytest.mark.parametrize("name", list(scenarios()))
def test_the_checks_read_as_pinned(name):
    assert shown(*scenarios()[name]) == json.loads(PINNED.read_text())[name]


if __name__ == "__main__":
    PINNED.write_text(json.dumps({name: shown(*s) for name, s in scenarios().items()}, indent=1, ensure_ascii=False)
                      + "\n")
