"""The write-gate and scale-mixer claims pinned on hand-made probe outputs: every field a report shows (claim, seed
figure, ours, verdict and reason, each precondition as listed, kind, seeds, margin) equals the pinned record in
``data/lia_probe_claims.json``, which the hand-built claims of ``relin.report.lia_mtr`` wrote before they became rows
of :data:`relin.config.lia_mtr.CLAIMS`. A change to how these claims are judged shows here as a diff."""
import json
from pathlib import Path

import numpy as np
import pytest

from relin.report import lia_mtr as lm

from .pins import shown_fields
from .test_lia_mtr_claims import CATS, mme

PINNED = Path(__file__).parent / "data" / "lia_probe_claims.json"
LIVES = [1.94, 8.6, 31.0, 138.28]
IMAGES = 40


def _one(gates, mixer, lives=LIVES, std=0.1) -> dict:
    return {"gate_per_image": list(gates), "gate_mean": float(np.mean(gates)), "gate_std": std, "half_lives": lives,
            "mixer_mean": list(np.mean(mixer, 0)), "mixer_per_image": np.asarray(mixer).tolist()}


def _probe(gates=None, diagonal=None, head=None, std=0.1, lives=LIVES) -> dict:
    gates = np.linspace(0.4, 0.6, IMAGES) if gates is None else gates
    diagonal = np.tile([0.4, 0.3, 0.2, 0.1], (IMAGES, 1)) if diagonal is None else diagonal
    out = _one(gates, diagonal, lives, std)
    out["bridges"] = {"lia_mtr": _one(gates, diagonal, lives, std)}
    if head is not None:
        out["bridges"]["lia_mtr_head_matrix"] = _one(gates, head, lives, std)
    return out


def _noisy(means, spread, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(np.asarray(means) + spread * rng.standard_normal((IMAGES, len(means))), 0, 1)


def scenarios() -> dict:
    """Name -> (probe.json, the MME scores): the gate and both mixer readings in each state a run can leave them."""
    good = dict.fromkeys(CATS, 0.9)
    learned = {"lia_mtr": good, "lia_mtr_head_matrix": good}
    used, unused = np.tile([0.4, 0.3, 0.2, 0.1], (IMAGES, 1)), np.tile([0.6, 0.395, 0.004, 0.001], (IMAGES, 1))
    return {
        "table 1 not run": (None, None),
        "no probe, MME run": (None, mme(learned, seeds=1)),
        "probe, no MME": (_probe(head=used), None),
        "ablation at chance": (_probe(head=used), mme({**learned, "lia_mtr_no_gate": {}}, seeds=1)),
        "ablation learned and differs": (_probe(head=used),
                                         mme({**learned, "lia_mtr_no_gate": dict.fromkeys(CATS, 0.65)}, seeds=1)),
        "ablation learned, the same": (_probe(head=used), mme({**learned, "lia_mtr_no_gate": good}, seeds=1)),
        "ablation not scored": (_probe(head=used), mme(learned, seeds=1)),
        "gate shut": (_probe(gates=[0.02] * IMAGES, head=used),
                      mme({**learned, "lia_mtr_no_gate": dict.fromkeys(CATS, 0.65)}, seeds=1)),
        "gate constant over tokens": (_probe(head=used, std=0.004),
                                      mme({**learned, "lia_mtr_no_gate": dict.fromkeys(CATS, 0.65)}, seeds=1)),
        "gate mean on the band's edge": (_probe(gates=_noisy([0.1], 0.05)[:, 0], head=used),
                                         mme({**learned, "lia_mtr_no_gate": dict.fromkeys(CATS, 0.65)}, seeds=1)),
        "ablation near the margin": (_probe(head=used),
                                     mme({**learned, "lia_mtr_no_gate": {**good, "existence": 0.85}}, seeds=1)),
        "three seeds": (_probe(head=used), mme({**learned, "lia_mtr_no_gate": dict.fromkeys(CATS, 0.65)}, seeds=3)),
        "mixer leaves scales unused": (_probe(diagonal=unused, head=used), mme(learned, seeds=1)),
        "mixer still uniform": (_probe(diagonal=np.full((IMAGES, 4), 0.25), head=used), mme(learned, seeds=1)),
        "mixer near its floor": (_probe(diagonal=_noisy([0.5, 0.3, 0.14, 0.06], 0.05), head=used),
                                 mme(learned, seeds=1)),
        "bridges at chance": (_probe(head=used), mme({"lia_mtr": {}, "lia_mtr_head_matrix": {}}, seeds=1)),
        "three scales": (_probe(diagonal=np.tile([0.7, 0.25, 0.05], (IMAGES, 1)), lives=[1.94, 16.4, 138.28],
                                head=np.tile([0.5, 0.3, 0.2], (IMAGES, 1))), mme(learned, seeds=1)),
        "one scale": (_probe(diagonal=np.ones((IMAGES, 1)), lives=[138.28]), mme(learned, seeds=1)),
        "head_matrix not probed": (_probe(), mme(learned, seeds=1)),
        "mixers without the gate's record": ({"bridges": {"lia_mtr": {"mixer_per_image": used.tolist(),
                                                                      "half_lives": LIVES}}}, None),
    }


def shown(probe: dict | None, scores) -> list[dict]:
    """The gate and mixer claims of the LIA-MTR section on these outputs, every field the report shows."""
    data = {"niah_metrics": {}, "niah_items": {}, "memory": [], "memory_metrics": {}, "patch_probe": None,
            "probe": probe}
    found = lm.claims(data, scores, lm.LiaSettings(0.8, 200))
    return [shown_fields(c) for c in found if "write gate" in c.claim or "scale mixer" in c.claim]


def record() -> dict:
    return {name: shown(probe, scores) for name, (probe, scores) in scenarios().items()}


@pytest.mark.parametrize("name", list(scenarios()))
def test_the_gate_and_mixer_claims_read_as_pinned(name):
    pinned = json.loads(PINNED.read_text())
    probe, scores = scenarios()[name]
    assert shown(probe, scores) == pinned[name]


def test_the_pinned_record_spans_every_outcome():
    """The scenarios leave each claim in each state its verdict can take, so the pin covers every branch."""
    claims = [c for found in json.loads(PINNED.read_text()).values() for c in found]
    for what in ("write gate", "scale mixer"):
        reached = {c["verdict"].split(" (")[0] for c in claims if what in c["claim"]}
        assert reached == {"reproduced", "contradicted", "inconclusive", "not testable here"}, what


if __name__ == "__main__":
    PINNED.write_text(json.dumps(record(), indent=1, ensure_ascii=False) + "\n")
