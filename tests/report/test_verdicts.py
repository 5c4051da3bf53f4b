"""The verdict module on hand-made metrics: intervals (items, Wilson, seeds), margins, and the preconditions that
make a claim not testable here."""
import numpy as np
import pytest

from relin.report.preconditions import competent, enough_seeds, headroom, moved, reached
from relin.report.verdicts import (
    CONTRADICTED,
    INCONCLUSIVE,
    NOT_TESTABLE,
    REPRODUCED,
    WITHIN_NOISE,
    Claim,
    Estimate,
    Margin,
    Precondition,
    Resampler,
    Verdict,
    at_least,
    at_most,
    beats,
    judged,
    mean_of,
    over_seeds,
    tally,
    wilson,
)

ONE = Margin(1.0, "one point")


def _items(rng, n, p):
    return (rng.random(n) < p).astype(float)


def test_the_interval_covers_a_known_binomial_proportion_in_93_to_97_percent_of_draws():
    rng = np.random.default_rng(1234)
    p, n, trials = 0.3, 200, 1000
    covered = 0
    for trial in range(trials):
        est = Resampler(["x"] * n, resamples=200, seed=trial).mean(_items(rng, n, p))
        covered += est.low <= p <= est.high
    assert 0.93 <= covered / trials <= 0.97, covered / trials


@pytest.mark.parametrize("hits", [0, 40])
def test_wilson_bounds_at_0_and_n_do_not_collapse(hits):
    n = 40
    low, high = wilson(hits, n)
    # the closed form: at 0 the upper bound is z² / (n + z²); at n the lower bound is n / (n + z²)
    z2 = 1.959963984540054 ** 2
    if hits == 0:
        assert low == 0.0 and high == pytest.approx(z2 / (n + z2))
    else:
        assert high == 1.0 and low == pytest.approx(n / (n + z2))
    est = Resampler(["x"] * n, resamples=100).mean(np.full(n, float(hits > 0)))
    assert (est.low, est.high) == (low, high), "a mean of right/wrong items carries its Wilson interval"
    assert est.high > est.low, "the percentile bootstrap would give [p, p] here"


def test_a_pooled_ratio_is_not_a_proportion_of_items_and_keeps_the_bootstrap():
    r = Resampler(["m"] * 2, resamples=10)
    est = r.ratio([1, 3], [2, 4])
    assert est.value == pytest.approx(4 / 6) and est.bounds is None


def test_stratified_draws_keep_each_stratum_size():
    strata = ["a"] * 30 + ["b"] * 10
    r = Resampler(strata, resamples=50, seed=0)
    assert ((r.index[:, :30] < 30).all() and (r.index[:, 30:] >= 30).all())
    scores = np.r_[np.linspace(0.5, 1.0, 30), np.zeros(10)]
    est = r.mean(scores, where=r.mask(lambda s: s == "b"))
    assert est.value == 0.0 and (est.draws == 0.0).all(), "every replicate draws stratum b's items only"


def test_seed_interval_widens_when_seeds_disagree():
    r = Resampler(["t"] * 400, seed=7)
    agree = [r.mean(np.r_[np.ones(k), np.zeros(400 - k)]) for k in (238, 240, 242)]
    disagree = [r.mean(np.r_[np.ones(k), np.zeros(400 - k)]) for k in (160, 240, 320)]
    a, d = over_seeds(agree), over_seeds(disagree)
    assert a.value == d.value == pytest.approx(0.6) and a.seeds == d.seeds == 3
    assert d.high - d.low > 3 * (a.high - a.low)
    assert over_seeds(agree[:1]) is agree[0]


def test_seed_interval_covers_a_known_mean_in_93_to_97_percent_of_1000_simulated_runs():
    """Three training seeds per run, each model's accuracy drawn around the known mean (training noise), then
    scored on its own items (evaluation noise)."""
    rng = np.random.default_rng(2024)
    mean, training_sd, n, seeds, runs = 0.6, 0.05, 200, 3, 1000
    r = Resampler(["t"] * n, resamples=200, seed=0)
    covered = 0
    for _ in range(runs):
        replicas = [r.mean(_items(rng, n, mean + training_sd * rng.standard_normal())) for _ in range(seeds)]
        est = over_seeds(replicas)
        covered += est.low <= mean <= est.high
    assert 0.93 <= covered / runs <= 0.97, covered / runs


def test_differences_pair_seeds_by_index_and_broadcast_a_single_seed_reference():
    a = Estimate(0.6, np.empty(0), np.array([0.5, 0.6, 0.7]))
    b = Estimate(0.5, np.empty(0), np.array([0.4, 0.5, 0.6]))
    difference = a - b
    assert difference.per_seed.tolist() == pytest.approx([0.1, 0.1, 0.1])
    assert difference.low == pytest.approx(0.1) == difference.high, "paired seeds that agree on the gap"
    ratio = a / Estimate.exact(0.5)
    assert ratio.per_seed.tolist() == pytest.approx([1.0, 1.2, 1.4]) and ratio.seeds == 3


def test_a_difference_inside_the_noise_is_inconclusive():
    rng = np.random.default_rng(3)
    r = Resampler(["t"] * 60, seed=2)
    base = _items(rng, 60, 0.6)
    other = base.copy()
    other[:3] = 1 - other[:3]
    verdict = beats((r.mean(other) - r.mean(base)) * 100, ONE)
    assert verdict.outcome == INCONCLUSIVE and verdict.reason.startswith(WITHIN_NOISE)


def test_a_clear_difference_is_reproduced_one_way_and_contradicted_the_other():
    r = Resampler(["t"] * 200, seed=4)
    strong = np.r_[np.ones(180), np.zeros(20)]
    weak = np.r_[np.ones(60), np.zeros(140)]
    assert beats((r.mean(strong) - r.mean(weak)) * 100, ONE).outcome == REPRODUCED
    verdict = beats((r.mean(weak) - r.mean(strong)) * 100, ONE, ("weak", "strong"))
    assert verdict.outcome == CONTRADICTED and verdict.reason.startswith("the other way round: strong ahead")


def test_a_sure_difference_inside_the_margin_is_smaller_than_the_margin_never_a_tie():
    ahead = Estimate(0.5, np.linspace(0.3, 0.8, 101))
    verdict = beats(ahead, Margin(2.0, "two points"), ("on-policy", "off-policy"))
    assert verdict.outcome == CONTRADICTED
    assert verdict.reason.startswith("smaller than the margin: on-policy ahead") and "tie" not in verdict.reason
    behind = beats(Estimate(-0.5, np.linspace(-0.8, -0.3, 101)), Margin(2.0, "two points"), ("A", "B"))
    assert behind.reason.startswith("smaller than the margin: B ahead")
    tie = beats(Estimate(0.0, np.linspace(-0.5, 0.5, 101)), Margin(2.0, "two points"))
    assert tie.outcome == CONTRADICTED and tie.reason.startswith("a tie")
    # reaching past -m: B may be ahead by more than the margin, so neither "smaller than the margin" nor "a tie"
    wide_behind = beats(Estimate(-2.0, np.linspace(-3.9, -0.3, 101)), Margin(1.0, "one point"), ("A", "B"))
    assert wide_behind.outcome == CONTRADICTED and wide_behind.reason.startswith("B ahead by 0.39–3.81 points")
    no_win = beats(Estimate(-0.7, np.linspace(-1.6, 0.15, 101)), Margin(1.0, "one point"), ("A", "B"))
    assert no_win.outcome == CONTRADICTED and no_win.reason.startswith("no win for A")


def test_thresholds():
    exact = Estimate.exact(0.9)
    assert at_least(exact, 0.8).outcome == REPRODUCED and at_least(exact, 0.95).outcome == CONTRADICTED
    assert at_most(exact, 0.95).outcome == REPRODUCED and at_most(exact, 0.5).outcome == CONTRADICTED
    wide = Estimate(0.5, np.linspace(0.3, 0.7, 101))
    assert at_least(wide, 0.5).reason.startswith(WITHIN_NOISE)


def test_paired_ratio_and_mean_of_estimates():
    r = Resampler(["a"] * 50 + ["b"] * 50, seed=6)
    student = r.mean(np.r_[np.ones(25), np.zeros(25), np.ones(50)], where=r.mask(lambda s: s == "a"))
    teacher = r.mean(np.ones(100), where=r.mask(lambda s: s == "a"))
    ratio = student / teacher
    assert ratio.value == pytest.approx(0.5) and ratio.low < 0.5 < ratio.high
    both = mean_of([student, teacher])
    assert both.value == pytest.approx(0.75)
    assert (both.draws == (student.draws + teacher.draws) / 2).all()


def test_the_vocabulary_needs_its_reasons():
    with pytest.raises(ValueError):
        Verdict(INCONCLUSIVE, "because")
    with pytest.raises(ValueError):
        Verdict(NOT_TESTABLE)
    with pytest.raises(ValueError):
        Verdict("holds in part")
    assert str(Verdict(INCONCLUSIVE, f"{WITHIN_NOISE}: wide")) == "inconclusive (within noise: wide)"


# --- each precondition failing alone --------------------------------------------------------------------------

CLEAR = Estimate(10.0, np.linspace(8.0, 12.0, 101))          # a clear win by 10 points
ARMS = {"A": Estimate(0.7, np.linspace(0.65, 0.75, 101), np.array([0.69, 0.7, 0.71])),
        "B": Estimate(0.6, np.linspace(0.55, 0.65, 101), np.array([0.59, 0.6, 0.61]))}


def _all_met() -> list[Precondition]:
    return [competent("the teacher", {"mqar": 0.95, "arithmetic": 0.91}, 0.8), enough_seeds(ARMS, 3),
            headroom(ARMS, 1.0, 0.5, 0.02), moved({"A": Estimate.exact(5.0), "B": Estimate.exact(-4.0)}, 2.0),
            reached("stage 3's rollout horizon", 64, 48, " tokens")]


def test_a_claim_whose_preconditions_hold_is_judged():
    pre = _all_met()
    assert all(p.holds for p in pre)
    assert judged(pre, lambda: beats(CLEAR, ONE)).outcome == REPRODUCED


@pytest.mark.parametrize("index, failing, named", [
    (0, competent("the teacher", {"mqar": 0.95, "arithmetic": 0.09}, 0.8), "arithmetic 0.09"),
    (1, enough_seeds({"A": ARMS["A"], "B": Estimate(0.6, np.linspace(0.55, 0.65, 101))}, 3), "B 1"),
    (2, headroom({"A": Estimate(1.0, np.ones(101)), "B": ARMS["B"]}, 1.0, 0.5, 0.02), "at the ceiling 1: A"),
    (2, headroom({"A": Estimate(0.52, np.linspace(0.45, 0.6, 101)), "B": Estimate(0.5, np.linspace(0.44, 0.56, 101))},
                 1.0, 0.5, 0.02), "within 0.02 of chance 0.5: A, B"),
    (3, moved({"A": Estimate.exact(0.4), "B": Estimate.exact(-4.0)}, 2.0), "A +0.4 [+0.4, +0.4] points"),
    (4, reached("stage 3's rollout horizon", 16, 48, " tokens"), "16 tokens"),
])
def test_each_precondition_failing_alone_makes_the_claim_not_testable_naming_it(index, failing, named):
    pre = _all_met()
    pre[index] = failing
    verdict = judged(pre, lambda: beats(CLEAR, ONE))
    assert verdict.outcome == NOT_TESTABLE
    assert failing.what in verdict.reason and named in verdict.reason
    assert all(p.what not in verdict.reason for i, p in enumerate(pre) if i != index)


def test_a_tie_at_the_ceiling_is_not_testable():
    r = Resampler(["scene"] * 40)
    full = r.ratio(np.full(40, 2.0), np.full(40, 2.0))
    arms = {"lia_mtr": full, "mlp2x_gelu": full}
    pre = (headroom(arms, 1.0, 0.5, 0.0125),)
    verdict = judged(pre, lambda: beats((full - full) * 100, Margin(1.25, "one question")))
    assert verdict.outcome == NOT_TESTABLE and "ceiling" in verdict.reason


def test_the_favoured_arm_alone_at_the_ceiling_lets_a_win_be_read_and_nothing_else():
    top, low = Estimate(1.0, np.ones(101)), ARMS["B"]
    pre = (headroom({"A": top, "B": low}, 1.0, 0.5, 0.02, favoured="A"),)
    assert pre[0].holds and pre[0].only_a_win and "only a win can be read" in pre[0].measured
    assert judged(pre, lambda: beats(CLEAR, ONE)).outcome == REPRODUCED
    tie = judged(pre, lambda: beats(Estimate(0.0, np.linspace(-1.0, 1.0, 101)), ONE))
    assert tie.outcome == NOT_TESTABLE and "at the ceiling 1: A" in tie.reason and "contradicted" in tie.reason
    unsure = judged(pre, lambda: beats(Estimate(1.0, np.linspace(0.0, 3.0, 101)), ONE))
    assert unsure.outcome == NOT_TESTABLE and "inconclusive" in unsure.reason


def test_both_arms_at_the_ceiling_leave_nothing_to_read():
    arms = {"A": Estimate(1.0, np.ones(101)), "B": Estimate(0.995, np.ones(101))}
    pre = (headroom(arms, 1.0, 0.5, 0.02, favoured="A"),)
    assert not pre[0].holds and not pre[0].only_a_win and not pre[0].only_a_loss
    assert judged(pre, lambda: beats(CLEAR, ONE)).outcome == NOT_TESTABLE


def test_the_disfavoured_arm_alone_at_the_ceiling_leaves_only_a_loss_to_read():
    """B at the ceiling can only be better than measured: a loss of A beyond the margin stands, anything else may be
    the ceiling's doing."""
    pre = (headroom({"A": ARMS["A"], "B": Estimate(1.0, np.ones(101))}, 1.0, 0.5, 0.02, favoured="A"),)
    assert pre[0].holds and pre[0].only_a_loss and "only a loss the other way round" in pre[0].measured
    behind = Estimate(-30.0, np.linspace(-34.0, -26.0, 101))
    assert judged(pre, lambda: beats(behind, ONE)).outcome == CONTRADICTED
    assert judged(pre, lambda: beats(CLEAR, ONE)).outcome == NOT_TESTABLE
    tie = judged(pre, lambda: beats(Estimate(0.0, np.linspace(-0.5, 0.5, 101)), ONE))
    assert tie.outcome == NOT_TESTABLE and "a tie" in tie.reason


def test_tally_counts_each_outcome():
    claims = [Claim("P", "c", "s", "o", Verdict(REPRODUCED)), Claim("P", "c", "s", "o", Verdict(NOT_TESTABLE, "x: y")),
              Claim("P", "c", "s", "o", Verdict(NOT_TESTABLE, "x: y"), kind="check")]
    assert tally(claims) == "3: 1 reproduced, 2 not testable here"
    with pytest.raises(ValueError):
        Claim("P", "c", "s", "o", Verdict(REPRODUCED), kind="aside")


def test_a_seed_interval_of_an_accuracy_stays_inside_0_and_1():
    r = Resampler(["t"] * 50, seed=3)
    low_seeds = [r.mean(np.r_[np.ones(k), np.zeros(50 - k)]) for k in (0, 0, 17)]
    est = over_seeds(low_seeds)
    assert est.low == 0.0 and est.high <= 1.0, "a t interval over [0, 0, 0.34] would reach below zero"


def test_paired_strata_share_their_draws_and_unpaired_ones_do_not():
    """NIAH cells of one length hold the same sequences at each depth: paired by length, the k-th item of each is
    drawn together, so a difference between depths is paired; other strata keep their own draws."""
    strata = [(16, d) for d in (0.0, 1.0) for _ in range(30)] + [(64, d) for d in (0.0, 1.0) for _ in range(30)]
    paired = Resampler(strata, resamples=40, paired=lambda cell: cell[0])
    offsets = paired.index - np.arange(len(strata)) // 30 * 30     # each draw's position within its stratum
    assert (offsets[:, :30] == offsets[:, 30:60]).all() and (offsets[:, 60:90] == offsets[:, 90:]).all()
    assert not (offsets[:, :30] == offsets[:, 60:90]).all(), "lengths draw apart"
    plain = Resampler(strata, resamples=40)
    plain_offsets = plain.index - np.arange(len(strata)) // 30 * 30
    assert not (plain_offsets[:, :30] == plain_offsets[:, 30:60]).all()
    assert (plain.index == Resampler(strata, resamples=40, paired=None).index).all()
    same = np.r_[np.arange(30) % 2, np.arange(30) % 2, np.zeros(60)].astype(float)   # one outcome at both depths
    first, second = (np.arange(120) < 30), (np.arange(120) >= 30) & (np.arange(120) < 60)
    assert (paired.mean(same, second).draws == paired.mean(same, first).draws).all(), \
        "the same items at two depths differ by nothing in any draw"
    assert (plain.mean(same, second).draws != plain.mean(same, first).draws).any()


def test_paired_strata_of_unequal_sizes_are_refused():
    with pytest.raises(ValueError, match="paired"):
        Resampler([("a", 0)] * 5 + [("a", 1)] * 4, resamples=10, paired=lambda s: s[0])
