"""The verdict module on hand-made item scores: intervals, chance, reference competence, noise."""
import numpy as np
import pytest

from relin.report.verdicts import (
    AT_CHANCE,
    CONTRADICTED,
    INCONCLUSIVE,
    REFERENCE_FAILS,
    REPRODUCED,
    WITHIN_NOISE,
    Estimate,
    Resampler,
    Verdict,
    at_least,
    at_most,
    beats,
    chance_guard,
    mean_of,
    reference_guard,
    within,
)


def _items(rng, n, p):
    return (rng.random(n) < p).astype(float)


def test_the_interval_covers_a_known_binomial_proportion_in_93_to_97_percent_of_draws():
    rng = np.random.default_rng(1234)
    p, n, trials = 0.3, 200, 1000
    covered = 0
    for trial in range(trials):
        est = Resampler(["x"] * n, resamples=1000, seed=trial).mean(_items(rng, n, p))
        covered += est.low <= p <= est.high
    assert 0.93 <= covered / trials <= 0.97, covered / trials


def test_stratified_draws_keep_each_stratum_size():
    strata = ["a"] * 30 + ["b"] * 10
    r = Resampler(strata, resamples=50, seed=0)
    assert ((r.index[:, :30] < 30).all() and (r.index[:, 30:] >= 30).all())
    # a family with every item right stays at 1.0 in every replicate
    hits = np.r_[np.ones(30), np.zeros(10)]
    est = r.mean(hits, where=r.mask(lambda s: s == "a"))
    assert est.value == est.low == est.high == 1.0


def test_pooled_ratio_weights_items_by_their_totals():
    r = Resampler(["m"] * 2, resamples=10)
    assert r.ratio([1, 3], [2, 4]).value == pytest.approx(4 / 6)


def test_both_models_at_chance_is_inconclusive_at_chance():
    rng = np.random.default_rng(0)
    r = Resampler(["q"] * 100, seed=1)
    a, b = r.mean(_items(rng, 100, 0.5)), r.mean(_items(rng, 100, 0.5))
    verdict = chance_guard({"A": a, "B": b}, 0.5)
    assert verdict is not None and verdict.outcome == INCONCLUSIVE and verdict.reason.startswith(AT_CHANCE)
    # one model clearly above chance: no guard
    c = r.mean(np.r_[np.ones(90), np.zeros(10)])
    assert chance_guard({"A": a, "C": c}, 0.5) is None


def test_a_constant_answerer_sits_exactly_at_chance():
    """Every image's pair is one yes and one no: answering yes to all gives 1 of 2 in every replicate."""
    r = Resampler(["existence"] * 40)
    est = r.ratio(np.ones(40), np.full(40, 2.0))
    assert est.value == est.low == est.high == 0.5
    assert chance_guard({"bridge": est}, 0.5).reason.startswith(AT_CHANCE)


def test_a_reference_below_its_threshold_makes_the_claim_inconclusive():
    verdict = reference_guard("teacher", 0.26, 0.8)
    assert verdict.outcome == INCONCLUSIVE and verdict.reason.startswith(REFERENCE_FAILS)
    assert reference_guard("teacher", 0.95, 0.8) is None
    assert reference_guard("teacher", None, 0.8).reason.startswith(REFERENCE_FAILS)


def test_a_difference_inside_the_noise_is_inconclusive():
    rng = np.random.default_rng(3)
    r = Resampler(["t"] * 60, seed=2)
    base = _items(rng, 60, 0.6)
    other = base.copy()
    other[:3] = 1 - other[:3]  # three items flipped: well inside the noise of 60 items
    verdict = beats(r.mean(other) - r.mean(base))
    assert verdict.outcome == INCONCLUSIVE and verdict.reason.startswith(WITHIN_NOISE)


def test_a_clear_difference_is_reproduced_one_way_and_contradicted_the_other():
    r = Resampler(["t"] * 200, seed=4)
    strong = np.r_[np.ones(180), np.zeros(20)]
    weak = np.r_[np.ones(60), np.zeros(140)]
    assert beats(r.mean(strong) - r.mean(weak)).outcome == REPRODUCED
    assert beats(r.mean(weak) - r.mean(strong)).outcome == CONTRADICTED


def test_a_tie_band_turns_a_small_sure_difference_into_no_win():
    r = Resampler(["t"] * 2000, seed=5)
    a = np.r_[np.ones(1010), np.zeros(990)]
    b = np.r_[np.ones(1000), np.zeros(1000)]
    difference = (r.mean(a) - r.mean(b)) * 100  # 0.5 points, interval well inside ±3
    verdict = beats(difference, tie=3.0)
    assert verdict.outcome == CONTRADICTED and verdict.reason.startswith("a tie")


def test_a_difference_reaching_below_the_tie_band_is_not_called_a_tie():
    behind = Estimate(-5.0, np.linspace(-10.0, -0.5, 101))
    verdict = beats(behind, tie=1.0)
    assert verdict.outcome == CONTRADICTED and verdict.reason.startswith("behind or tied")
    assert beats(Estimate(-5.0, np.linspace(-10.0, -2.0, 101)), tie=1.0).reason == "the other way round"


def test_thresholds_and_targets():
    exact = Estimate.exact(0.9)
    assert at_least(exact, 0.8).outcome == REPRODUCED and at_least(exact, 0.95).outcome == CONTRADICTED
    assert at_most(exact, 0.95).outcome == REPRODUCED and at_most(exact, 0.5).outcome == CONTRADICTED
    wide = Estimate(0.5, np.linspace(0.3, 0.7, 101))
    assert at_least(wide, 0.5).reason.startswith(WITHIN_NOISE)
    assert within(Estimate(0.5, np.linspace(0.49, 0.51, 101)), 0.5053, 0.0444).outcome == REPRODUCED
    assert within(Estimate(0.2, np.linspace(0.15, 0.25, 101)), 0.5053, 0.0444).outcome == CONTRADICTED


def test_paired_ratio_and_mean_of_estimates():
    r = Resampler(["a"] * 50 + ["b"] * 50, seed=6)
    student = r.mean(np.r_[np.ones(25), np.zeros(25), np.ones(50)], where=r.mask(lambda s: s == "a"))
    teacher = r.mean(np.ones(100), where=r.mask(lambda s: s == "a"))
    ratio = student / teacher
    assert ratio.value == pytest.approx(0.5) and ratio.low < 0.5 < ratio.high
    both = mean_of([student, teacher])
    assert both.value == pytest.approx(0.75)
    assert (both.draws == (student.draws + teacher.draws) / 2).all()


def test_an_inconclusive_verdict_needs_a_reason_from_the_vocabulary():
    with pytest.raises(ValueError):
        Verdict(INCONCLUSIVE, "because")
    with pytest.raises(ValueError):
        Verdict("holds in part")
    assert str(Verdict(INCONCLUSIVE, f"{AT_CHANCE}: both 0.5")) == "inconclusive (at chance: both 0.5)"


def test_replicas_of_a_model_widen_its_interval_by_their_spread():
    from relin.report.verdicts import over_seeds

    r = Resampler(["t"] * 400, seed=7)
    one = r.mean(np.r_[np.ones(200), np.zeros(200)])
    other = r.mean(np.r_[np.ones(280), np.zeros(120)])
    both = over_seeds([one, other])
    assert both.value == pytest.approx(0.6)
    assert both.high - both.low > one.high - one.low, "the seed draw adds training noise"
    assert over_seeds([one]) is one
