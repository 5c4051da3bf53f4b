import math

import pytest

from relin.errors import ConfigError
from relin.train.schedules import lr_multiplier


def test_cosine_warms_up_linearly_then_decays_to_min():
    f = lr_multiplier("cosine", total_steps=100, warmup_steps=10, min_lr_ratio=0.1)
    warm = [f(s) for s in range(10)]
    assert all(b > a for a, b in zip(warm, warm[1:]))
    assert warm[0] == pytest.approx(1 / 11)
    assert f(10) == pytest.approx(1.0)
    decay = [f(s) for s in range(10, 101)]
    assert all(b <= a for a, b in zip(decay, decay[1:]))
    assert f(55) == pytest.approx(0.1 + 0.9 * 0.5, abs=1e-9), "cosine midpoint is halfway between peak and min"
    assert f(100) == pytest.approx(0.1)


def test_wsd_is_stable_then_decays_linearly_in_the_final_fraction():
    f = lr_multiplier("wsd", total_steps=100, warmup_steps=5, min_lr_ratio=0.0, decay_fraction=0.2)
    assert f(0) < f(4) < 1.0
    assert all(f(s) == 1.0 for s in range(5, 80))
    tail = [f(s) for s in range(80, 101)]
    assert all(b < a for a, b in zip(tail, tail[1:]))
    assert f(90) == pytest.approx(0.5)
    assert f(100) == pytest.approx(0.0)


def test_constant_after_warmup():
    f = lr_multiplier("constant", total_steps=50, warmup_steps=3, min_lr_ratio=0.1)
    assert [f(s) for s in range(3)] == pytest.approx([0.25, 0.5, 0.75])
    assert {f(s) for s in range(3, 51)} == {1.0}


def test_zero_warmup_starts_at_peak():
    assert lr_multiplier("cosine", 10, 0, 0.0)(0) == pytest.approx(1.0)
    assert not math.isnan(lr_multiplier("wsd", 1, 0, 0.0, 1.0)(0))


def test_unknown_schedule_names_the_choices():
    with pytest.raises(ConfigError, match="cosine, wsd or constant"):
        lr_multiplier("linear", 10, 0, 0.1)
