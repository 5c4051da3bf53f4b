"""Every kind of precondition passes on some hand-built input and fails on another (none is a constant), and the
report builds preconditions through :mod:`relin.report.preconditions` alone, so that holds for each one it shows."""
import ast
import inspect
import math
from pathlib import Path

import numpy as np
import pytest

import relin.report.preconditions as pc
from relin.report.verdicts import CONTRADICTED, NOT_TESTABLE, REPRODUCED, Estimate, Margin, beats, judged

SOURCE = Path(pc.__file__).parents[1]


def _arm(value, low, high, seeds=None):
    return Estimate(value, np.linspace(low, high, 101), None if seeds is None else np.full(seeds, value))


CLEAR, AT_CHANCE, TOP = _arm(0.7, 0.65, 0.75, 3), _arm(0.5, 0.44, 0.56, 3), _arm(1.0, 1.0, 1.0, 3)
# Per constructor: arguments under which it holds, then arguments under which it fails.
CASES = {
    "competent": (("the teacher", {"mqar": 0.95}, 0.8), ("the teacher", {"mqar": 0.95, "walk": 0.4}, 0.8)),
    "learned": (("opal-onpolicy", "its tasks", _arm(93.0, 85, 100), 90.0, "93%"),
                ("opal-onpolicy", "its tasks", _arm(60.0, 50, 70), 90.0, "60%")),
    "above_chance": (("lia_mtr", CLEAR, 0.5, 0.02), ("lia_mtr", AT_CHANCE, 0.5, 0.02)),
    "enough_seeds": (({"A": CLEAR, "B": CLEAR}, 3), ({"A": CLEAR, "B": _arm(0.6, 0.55, 0.65)}, 3)),
    "headroom": (({"A": CLEAR, "B": _arm(0.6, 0.55, 0.65)}, 1.0, 0.5, 0.02),
                 ({"A": CLEAR, "B": AT_CHANCE}, 1.0, 0.5, 0.02)),
    "moved": (({"A": _arm(5.0, 3.0, 7.0)}, 2.0), ({"A": _arm(5.0, -1.0, 11.0)}, 2.0)),
    "reached": (("stage 3's rollout horizon", 64, 48), ("stage 3's rollout horizon", 32, 48)),
    "items": (("needles beyond the reach", {"niah_single": 12}, 1), ("needles beyond the reach",
                                                                     {"niah_single": 12, "niah_multikey": 0}, 1)),
    "exact": (("peak bytes counted by the allocator", "allocator", ("allocator",)),
              ("peak bytes counted by the allocator", "rss", ("allocator",))),
    "different": (("the selections keep different layers", [0, 2], [3, 7], "kl_guided [0, 2], every_n [3, 7]"),
                  ("the selections keep different layers", [3, 7], [3, 7], "kl_guided [3, 7], every_n [3, 7]")),
    "within": (("the per-patch probe", {"count": 0.52}, -math.inf, 0.6),
               ("the per-patch probe", {"count": 0.52, "color": 0.95}, -math.inf, 0.6)),
}


def test_every_kind_of_precondition_has_a_passing_and_a_failing_case():
    kinds = {name for name, fn in inspect.getmembers(pc, inspect.isfunction) if fn.__module__ == pc.__name__}
    assert kinds == set(CASES), "a precondition without a pass and a fail case here could be a constant"


@pytest.mark.parametrize("kind", sorted(CASES))
def test_each_precondition_passes_and_fails_on_hand_built_inputs(kind):
    passing, failing = CASES[kind]
    built = getattr(pc, kind)
    assert built(*passing).holds, built(*passing)
    refused = built(*failing)
    assert not refused.holds and refused.measured, refused


def _precondition_calls(tree: ast.AST):
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "Precondition"]


def test_no_precondition_is_a_constant():
    """Outside relin.report.preconditions nothing builds a Precondition, and inside it no holds is a literal: every
    precondition the report shows comes from a constructor the test above makes pass and fail."""
    for path in sorted(SOURCE.rglob("*.py")):
        calls = _precondition_calls(ast.parse(path.read_text()))
        if path.name == "preconditions.py":
            holds = [c.args[2] if len(c.args) > 2 else next(k.value for k in c.keywords if k.arg == "holds")
                     for c in calls]
            assert holds and not any(isinstance(h, ast.Constant) for h in holds), path
        else:
            assert not calls, f"{path.relative_to(SOURCE)} builds a Precondition itself (line {calls[0].lineno})"


def test_a_win_over_an_arm_at_chance_is_readable_and_nothing_else():
    """Only the arm the claim disfavours at chance: the floor hides how far below the favoured arm it is, so the
    difference is a lower bound; a tie or a loss there cannot be read. Both at chance: nothing can. The favoured arm
    alone at chance: only its loss can be read."""
    pre = pc.headroom({"A": CLEAR, "B": AT_CHANCE}, 1.0, 0.5, 0.02, favoured="A")
    assert pre.holds and pre.only_a_win and "disfavours at chance" in pre.measured
    assert judged((pre,), lambda: beats(_arm(20.0, 14.0, 26.0), Margin(2.0, "two points"))).outcome == REPRODUCED
    tie = judged((pre,), lambda: beats(_arm(0.0, -3.0, 3.0), Margin(2.0, "two points")))
    assert tie.outcome == NOT_TESTABLE
    both = pc.headroom({"A": AT_CHANCE, "B": AT_CHANCE}, 1.0, 0.5, 0.02, favoured="A")
    assert not both.holds and "within 0.02 of chance 0.5: A, B" in both.measured
    favoured_low = pc.headroom({"A": AT_CHANCE, "B": CLEAR}, 1.0, 0.5, 0.02, favoured="A")
    assert favoured_low.holds and favoured_low.only_a_loss and not favoured_low.only_a_win
    loss = judged((favoured_low,), lambda: beats(_arm(-20.0, -26.0, -14.0), Margin(2.0, "two points")))
    assert loss.outcome == CONTRADICTED
    assert judged((favoured_low,), lambda: beats(_arm(1.0, -1.0, 3.0), Margin(2.0, "p"))).outcome == NOT_TESTABLE


def test_an_arm_whose_interval_clears_chance_by_less_than_the_margin_is_at_chance():
    """Issue 62: Table I's phase 2 read two bridges answering at chance (51.2% [50.2, 52.2]) as a contradiction."""
    barely = _arm(0.512, 0.502, 0.522)
    assert not pc.headroom({"lia_mtr": barely, "mlp": barely}, 1.0, 0.5, 0.005).holds
    assert pc.headroom({"lia_mtr": _arm(0.6, 0.56, 0.64), "mlp": _arm(0.58, 0.54, 0.62)}, 1.0, 0.5, 0.005).holds


def test_moved_reads_the_interval_not_the_point():
    """Issue 62: a change of +9 points whose interval holds zero is not a move."""
    assert not pc.moved({"stage 3": _arm(9.3, -1.0, 19.6)}, 2.0).holds
    assert pc.moved({"stage 3": _arm(-9.3, -19.6, -3.0)}, 2.0).holds


def test_a_reference_trained_on_what_the_students_never_saw_leaves_only_a_win():
    pre = pc.competent("the teacher", {"niah_single": 0.95, "niah_text": 0.9}, 0.8, trained_on=("niah_single",))
    assert pre.holds and pre.only_a_win and "trained on niah_single" in pre.measured
    assert not pc.competent("the teacher", {"niah_single": 0.95}, 0.8).only_a_win
