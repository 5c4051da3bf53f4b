"""The OPAL section's claim lines: on-policy against the matched off-policy control."""
from pathlib import Path

import pytest

from relin.report.inputs import EvalResult
from relin.report.opal import table4, verdicts


def _eval(name: str, niah: float, arithmetic: float = 0.5) -> EvalResult:
    accuracy = {"niah_single": niah, "niah_multikey": niah, "niah_multiquery": niah, "arithmetic": arithmetic}
    return EvalResult(name=name, metrics={"accuracy": accuracy, "perplexity": 10.0}, path=Path(f"{name}.json"))


@pytest.mark.parametrize("onpolicy, matched, verdict", [
    (0.56, 0.42, "holds"),
    (0.42, 0.56, "does not hold at our scale"),
    (0.422, 0.42, "a tie at our scale"),
    (0.42, 0.42, "a tie at our scale"),
])
def test_onpolicy_claim_needs_more_than_a_point_of_recovery(onpolicy, matched, verdict):
    evals = {"teacher-qwen3": _eval("teacher-qwen3", 0.8), "opal-onpolicy": _eval("opal-onpolicy", onpolicy),
             "opal-offpolicy_matched": _eval("opal-offpolicy_matched", matched)}
    rows = {row[0]: row for row in verdicts(evals, None).rows}
    row = rows["On-policy distillation beats off-policy at a matched budget"]
    assert row[-1] == verdict


def test_table4_names_the_families_the_teacher_mostly_fails():
    teacher = _eval("teacher-qwen3", 0.9)
    teacher.metrics["accuracy"]["niah_multikey"] = 0.27
    note = table4({"teacher-qwen3": teacher}).note
    assert "niah_multikey (0.27)" in note
    assert "niah_single" not in note.split("below")[1] and "niah_multiquery" not in note.split("below")[1]
    assert "below" not in table4({"teacher-qwen3": _eval("teacher-qwen3", 0.9)}).note
