"""How complete are the qrels (#33), checked on simulated projects with known truth and against independent
computations: scipy's Poisson-binomial and hypergeometric distributions, a Horvitz-Thompson estimate worked by
hand, tarexp's ledger fed by hand.

A simulated project: N pairs whose true relevance is drawn from a calibrated P (p_i ~ Beta(0.3, 2), y_i ~
Bernoulli(p_i)); experts label the 100 pairs the judge is least sure of and the random validation sample (the
first n pairs of a random order of the pool). The calibrated judge reports p_i; the miscalibrated one p_i^0.4,
which claims far more relevant pairs than there are."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from models_llm.metrics.completeness import (
    EXACT_LIMIT,
    CompletenessError,
    Estimate,
    beyond_pool_total,
    design_based_total,
    horvitz_thompson,
    knee_stops,
    model_based_total,
    poisson_binomial_cdf,
    poisson_binomial_pmf,
    recall_reached_probability,
    verified_recall,
)

PROJECTS = 200
POOL = 1000
TARGETED = 100
SAMPLE = 150


def simulated_project(seed: int, *, miscalibrated: bool = False):
    rng = np.random.default_rng(seed)
    p = rng.beta(0.3, 2.0, POOL)
    relevant = rng.random(POOL) < p
    judge = p ** 0.4 if miscalibrated else p
    labelled = np.zeros(POOL, dtype=bool)
    labelled[np.argsort(np.abs(judge - 0.5), kind="stable")[:TARGETED]] = True
    sample = rng.permutation(POOL)[:SAMPLE]
    labelled[sample] = True
    model = model_based_total(int(relevant[labelled].sum()), judge[~labelled])
    design = design_based_total(int(relevant[sample].sum()), SAMPLE, POOL)
    return int(relevant.sum()), model, design


@pytest.fixture(scope="module")
def calibrated():
    return [simulated_project(seed) for seed in range(PROJECTS)]


@pytest.fixture(scope="module")
def miscalibrated():
    return [simulated_project(seed, miscalibrated=True) for seed in range(PROJECTS)]


def coverage(runs, which: int) -> float:
    return float(np.mean([run[which].covers(run[0]) for run in runs]))


def test_both_90_percent_intervals_cover_the_true_count_for_a_calibrated_judge(calibrated):
    assert 0.85 <= coverage(calibrated, 1) <= 0.95, "model-based"
    assert 0.85 <= coverage(calibrated, 2) <= 0.95, "design-based"
    # and they are estimates, not bounds wide enough to cover anything: the model's interval is the narrower
    widths = np.array([[run[1].high - run[1].low, run[2].high - run[2].low] for run in calibrated])
    assert widths[:, 0].mean() < widths[:, 1].mean() < 0.75 * np.mean([run[0] for run in calibrated])
    disagreements = np.mean([not run[1].overlaps(run[2]) for run in calibrated])
    assert disagreements < 0.05  # the warning rarely fires when nothing is wrong


def test_for_a_miscalibrated_judge_only_the_design_based_interval_covers_and_the_warning_fires(miscalibrated):
    assert 0.85 <= coverage(miscalibrated, 2) <= 0.95
    assert coverage(miscalibrated, 1) < 0.05
    assert np.mean([not run[1].overlaps(run[2]) for run in miscalibrated]) > 0.95


def test_the_poisson_binomial_is_scipys():
    rng = np.random.default_rng(3)
    p = rng.random(400)
    reference = stats.poisson_binom(p)
    assert np.allclose(poisson_binomial_pmf(p), reference.pmf(np.arange(401)), atol=1e-12)
    assert np.allclose(poisson_binomial_pmf(p, upto=30), reference.pmf(np.arange(31)), atol=1e-12)
    ks = np.array([-1, 0, 150, 200, 250, 400, 401])
    assert np.allclose(poisson_binomial_cdf(p, ks), reference.cdf(ks), atol=1e-12)
    # above EXACT_LIMIT the refined normal approximation: checked against scipy's exact CDF on 3,000 trials
    # by lowering the limit for the call
    import models_llm.metrics.completeness as module

    q = rng.beta(0.3, 2.0, 3000)
    grid = np.arange(0, 3001, 7)
    module.EXACT_LIMIT, saved = 100, module.EXACT_LIMIT
    try:
        approximate = poisson_binomial_cdf(q, grid)
    finally:
        module.EXACT_LIMIT = saved
    assert np.abs(approximate - stats.poisson_binom.cdf(grid, q)).max() < 2e-3
    assert EXACT_LIMIT == saved


def test_the_model_based_interval_is_the_poisson_binomials_quantiles():
    rng = np.random.default_rng(4)
    p = rng.random(60) * 0.4
    found = model_based_total(7, p, level=0.8)
    cdf = stats.poisson_binom.cdf(np.arange(61), p)
    assert found.low == 7 + np.argmax(cdf >= 0.1) and found.high == 7 + np.argmax(cdf >= 0.9)
    assert found.total == pytest.approx(7 + p.sum())


def test_horvitz_thompson_on_ten_items_by_hand():
    # ten sampled pairs with unequal inclusion probabilities (say two strata: 1 in 4 and 1 in 10)
    y = [1, 0, 1, 1, 0, 0, 1, 0, 0, 1]
    pi = [0.25, 0.25, 0.25, 0.25, 0.25, 0.1, 0.1, 0.1, 0.1, 0.1]
    total, variance = horvitz_thompson(y, pi)
    # by hand: relevant ones weigh 1 / pi: 3 x 4 from the first stratum, 2 x 10 from the second
    assert total == pytest.approx(3 * 4 + 2 * 10)
    # Poisson-sampling variance: (1 - pi) / pi^2 per relevant one: 3 x 0.75 x 16 + 2 x 0.9 x 100
    assert variance == pytest.approx(3 * 0.75 * 16 + 2 * 0.9 * 100)
    with pytest.raises(CompletenessError):
        horvitz_thompson([1], [0.0])


def test_the_design_based_interval_is_the_hypergeometric_mid_p_interval():
    found = design_based_total(6, 80, 900, level=0.9)
    assert found.total == pytest.approx(6 * 900 / 80)

    def upper(total):  # P(X > 6) + P(X = 6) / 2 under K = total: rises with K
        return stats.hypergeom.sf(6, 900, total, 80) + 0.5 * stats.hypergeom.pmf(6, 900, total, 80)

    def lower(total):
        return stats.hypergeom.cdf(5, 900, total, 80) + 0.5 * stats.hypergeom.pmf(6, 900, total, 80)

    every = np.arange(6, 900 - 74 + 1)
    assert found.low == every[np.array([upper(k) for k in every]) >= 0.05].min()
    assert found.high == every[np.array([lower(k) for k in every]) >= 0.05].max()
    assert design_based_total(0, 0, 900) is None
    whole = design_based_total(40, 900, 900)
    assert (whole.total, whole.low, whole.high) == (40, 40, 40)  # the whole pool graded: no uncertainty left
    with pytest.raises(CompletenessError):
        design_based_total(5, 4, 900)


def test_the_verified_recall_and_the_stopping_probability():
    estimate = Estimate("model", 50.0, 40.0, 80.0, 0.9)
    recall = verified_recall(36, estimate)
    assert (recall.value, recall.low, recall.high) == (pytest.approx(0.72), pytest.approx(0.45), pytest.approx(0.9))
    rng = np.random.default_rng(5)
    p = rng.random(200) * 0.1
    # P(36 / (36 + X) >= 0.9) = P(X <= 4)
    assert recall_reached_probability(36, p, 0.9) == pytest.approx(stats.poisson_binom.cdf(4, p))
    with pytest.raises(CompletenessError):
        recall_reached_probability(36, p, 1.5)


def simulated_stopping(seed: int, *, target: float = 0.9, alpha: float = 0.1, batch: int = 25):
    """A project labelled in rounds of `batch`: four in five from the judge's most likely relevant pairs not yet
    labelled, one in five from the random order (the validation floor); the rule is checked after each round.
    Returns (true recall at the stop, labels spent, labels random order needs to reach that recall)."""
    rng = np.random.default_rng(1000 + seed)
    p = rng.beta(0.3, 4.0, POOL)
    relevant = rng.random(POOL) < p
    order_likely = list(np.argsort(-p, kind="stable"))
    order_random = list(rng.permutation(POOL))
    labelled = np.zeros(POOL, dtype=bool)
    spent = 0
    while spent < POOL:
        for source, share in ((order_likely, batch * 4 // 5), (order_random, batch - batch * 4 // 5)):
            taken = 0
            while source and taken < share:
                index = source.pop(0)
                if not labelled[index]:
                    labelled[index] = True
                    taken += 1
            spent += taken
        verified = int(relevant[labelled].sum())
        if recall_reached_probability(verified, p[~labelled], target) >= 1 - alpha:
            break
    recall = relevant[labelled].sum() / max(relevant.sum(), 1)
    needed = int(np.argmax(np.cumsum(relevant[rng.permutation(POOL)]) >= np.ceil(target * relevant.sum()))) + 1
    return recall, spent, needed


def test_the_stopping_rule_meets_its_recall_target_with_fewer_labels_than_random_order():
    runs = np.array([simulated_stopping(seed) for seed in range(PROJECTS)])
    assert np.mean(runs[:, 0] >= 0.9) >= 0.85
    spent, random_order = runs[:, 1].mean(), runs[:, 2].mean()
    print(f"stopping at R=0.9, alpha=0.1: {np.mean(runs[:, 0] >= 0.9):.1%} of {PROJECTS} projects reached recall "
          f"0.9; labels spent {spent:.0f} on average against {random_order:.0f} in random order")
    assert spent < 0.6 * random_order


def test_the_knee_rule_is_tarexps_on_the_gain_curve():
    steep_then_flat = [True] * 60 + [False] * 600
    assert knee_stops(steep_then_flat)
    assert not knee_stops([True] * 60 + [False] * 60)  # still finding: no knee yet
    assert not knee_stops([])
    # by hand, tarexp's rho at the best knee of the first curve: (60 / 60) / ((1 + 0) / 600) = 600 >= 156 - 60
    mixed = [bool(i % 3 == 0) for i in range(300)]
    assert not knee_stops(mixed)  # a steady rate has no knee


def test_sample_accuracy_is_scikit_learns_and_its_intervals_cover_the_pools_figures():
    from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, precision_score, recall_score

    from models_llm.metrics.completeness import sample_accuracy

    rng = np.random.default_rng(11)
    truth = rng.random(300) < 0.3
    guess = np.where(rng.random(300) < 0.8, truth, ~truth)
    found = sample_accuracy(guess, truth)
    reference = {"precision": precision_score(truth, guess), "recall": recall_score(truth, guess),
                 "f1": f1_score(truth, guess), "kappa": cohen_kappa_score(truth, guess),
                 "accuracy": accuracy_score(truth, guess)}
    for name, value in reference.items():
        assert found[name]["value"] == pytest.approx(value, abs=1e-12), name
        low, high = found[name]["interval"]
        assert low < value < high
    assert found["n"] == 300 and found["tp"] == int((guess & truth).sum())
    # with the judge's P: AUROC as scikit-learn computes it, ECE as the validation report's (10 equal-width bins)
    from sklearn.metrics import roc_auc_score

    from models_llm.metrics.calibration_error import ece

    p = np.clip(np.where(truth, 0.6, 0.3) + rng.normal(0, 0.2, 300), 0, 1)
    with_p = sample_accuracy(p >= 0.5, truth, p=p)
    assert with_p["auroc"]["value"] == pytest.approx(roc_auc_score(truth, p), abs=1e-12)
    assert with_p["ece"]["value"] == pytest.approx(ece(p, truth.astype(int)), abs=1e-12)
    for name in ("auroc", "ece"):
        low, high = with_p[name]["interval"]
        assert low < with_p[name]["value"] < high
    assert sample_accuracy([], [])["f1"] is None
    # on simulated pools the sample's 95 % intervals cover the whole pool's F1 and kappa in about 95 % of them
    covered = {"f1": [], "kappa": []}
    for seed in range(100):
        rng = np.random.default_rng(seed)
        p = rng.beta(0.5, 2.0, 2000)
        truth = rng.random(2000) < p
        guess = p >= 0.5
        sample = rng.permutation(2000)[:200]
        found = sample_accuracy(guess[sample], truth[sample], draws=400, seed=seed)
        whole = {"f1": f1_score(truth, guess), "kappa": cohen_kappa_score(truth, guess)}
        for name, hits in covered.items():
            low, high = found[name]["interval"]
            hits.append(low <= whole[name] <= high)
    assert all(0.88 <= np.mean(hits) <= 1.0 for hits in covered.values()), {k: np.mean(v) for k, v in covered.items()}


def test_beyond_the_pool_intervals_cover_the_relevant_entries_below_the_pool():
    """200 seeded runs: 2,000 entries below the pool, true relevance drawn from calibrated P (mostly low, as below a
    pool); a sample of 200 scored. The 90 % intervals cover the true count in 85-95 % of them."""
    covered = 0
    for seed in range(200):
        rng = np.random.default_rng(1000 + seed)
        p = rng.beta(0.4, 6.0, size=2000)
        truth = int((rng.random(2000) < p).sum())
        sample = rng.choice(2000, size=200, replace=False)
        estimate = beyond_pool_total(p[sample], 2000, level=0.9)
        covered += estimate.covers(truth)
    assert 0.85 <= covered / 200 <= 0.95, covered


def test_beyond_the_pool_by_hand():
    """Five of twenty entries sampled: T = 20/5 * sum P; the variance's two terms computed here by hand."""
    p = [0.1, 0.4, 0.0, 0.9, 0.2]
    estimate = beyond_pool_total(p, 20, level=0.9)
    mean = sum(p) / 5
    s2 = sum((x - mean) ** 2 for x in p) / 4
    variance = 20**2 * (1 - 5 / 20) * s2 / 5 + 20 / 5 * sum(x * (1 - x) for x in p)
    half = stats.norm.ppf(0.95) * variance**0.5
    assert estimate.total == pytest.approx(4 * 1.6)
    assert (estimate.low, estimate.high) == pytest.approx((max(0, 6.4 - half), 6.4 + half))
    # The whole population scored: only the Bernoulli term is left; no sample, no estimate; bad input refused.
    census = beyond_pool_total(p, 5)
    assert census.high - census.total == pytest.approx(stats.norm.ppf(0.95) * sum(x * (1 - x) for x in p) ** 0.5)
    assert beyond_pool_total([], 10) is None
    with pytest.raises(CompletenessError, match="does not fit"):
        beyond_pool_total(p, 4)
    with pytest.raises(CompletenessError, match="within"):
        beyond_pool_total([1.5], 4)
