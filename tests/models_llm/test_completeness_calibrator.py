"""The model-based estimate of a judge whose P is a score (#48): its calibrator's own uncertainty goes into the
interval, whichever calibrator is used, and an isotonic calibrator never says 0 or 1.

A simulated round: a pool of 1,000 pairs scored by a judge whose score s ~ Beta(2, 5) is not a probability (the
true P of relevance is sigmoid(3 logit(s) + 0.5): summed, the scores claim 276 relevant pairs where there are
200); experts graded the random validation sample (150 pairs) and the round's 60 pairs of highest score. The calibrator (isotonic or Platt, forced) is fitted on those
210 gold pairs and the 90 % interval of the relevant count is checked against the pool's true count."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, logit

from models_llm.calibration import PlattPosterior, calibrator_fit, calibrator_posterior
from models_llm.metrics.completeness import count_draws, model_based_total_drawn, recall_reached_probability

ROUNDS = 300
POOL, SAMPLE, TARGETED = 1000, 150, 60


def simulated_round(seed: int, method: str):
    rng = np.random.default_rng(seed)
    score = rng.beta(2.0, 5.0, POOL)
    relevant = rng.random(POOL) < expit(3.0 * logit(score) + 0.5)
    gold = np.zeros(POOL, dtype=bool)
    gold[rng.permutation(POOL)[:SAMPLE]] = True
    gold[np.argsort(-score)[:TARGETED]] = True
    posterior = calibrator_posterior(method, score[gold], relevant[gold])
    drawn = count_draws(posterior, score[~gold], np.zeros((~gold).sum(), dtype=int), 1, draws=500, seed=seed)
    estimate = model_based_total_drawn(int(relevant[gold].sum()), drawn)
    return int(relevant.sum()), estimate


@pytest.mark.parametrize("method", ["isotonic", "platt"])
def test_the_model_based_90_percent_interval_covers_the_true_count_whichever_calibrator(method):
    rounds = [simulated_round(seed, method) for seed in range(ROUNDS)]
    covered = np.mean([estimate.covers(truth) for truth, estimate in rounds])
    assert 0.85 <= covered <= 0.95, covered
    # an interval, not a point: before #48 an isotonic fit's P of 0 and 1 collapsed it to [65, 65] with 73 true
    widths = np.array([estimate.high - estimate.low for _, estimate in rounds])
    assert widths.min() > 20


def test_an_isotonic_calibrator_never_gives_a_p_of_0_or_1():
    # gold that separates perfectly: every pair below 0.4 irrelevant, every pair above relevant
    rng = np.random.default_rng(5)
    raw = rng.random(300)
    relevant = raw > 0.4
    fit = calibrator_fit(raw, relevant)
    grid = np.linspace(0.0, 1.0, 1001)
    isotonic = calibrator_posterior("isotonic", raw, relevant)
    calibrated = isotonic.mean().apply(grid)
    assert 0.0 < calibrated.min() and calibrated.max() < 1.0
    # Jeffreys' posterior mean of each end block: (0 + 1/2) / (n + 1) and (n + 1/2) / (n + 1)
    below, above = int((~relevant).sum()), int(relevant.sum())
    assert calibrated.min() == pytest.approx(0.5 / (below + 1)) and calibrated.max() == pytest.approx(
        (above + 0.5) / (above + 1))
    if fit.calibrator.method == "isotonic":
        assert fit.calibrator == isotonic.mean()
    draws = isotonic.draw(grid, 200, np.random.default_rng(1))
    assert 0.0 < draws.min() and draws.max() < 1.0
    # 5,000 open pairs below the gold's lowest irrelevant block: some of them may be relevant, and the interval says so
    drawn = count_draws(isotonic, rng.random(5000) * 0.4, np.zeros(5000, dtype=int), 1, seed=2)
    estimate = model_based_total_drawn(0, drawn)
    assert estimate.low < estimate.high and estimate.total == pytest.approx(5000 * 0.5 / (below + 1), rel=0.1)


def test_count_draws_of_a_known_calibrator_are_the_poisson_binomial():
    """With no uncertainty left in the calibrator (Platt with a zero covariance), the drawn counts are X's own
    distribution: scipy's Poisson-binomial of the calibrated P, per group."""
    rng = np.random.default_rng(3)
    raw = rng.beta(0.5, 2.0, 400)
    group = rng.integers(0, 3, 400)
    known = PlattPosterior(centre=np.array([1.3, -0.4]), covariance=np.zeros((2, 2)))
    p = expit(1.3 * logit(raw) - 0.4)
    drawn = count_draws(known, raw, group, 3, draws=20000, seed=4)
    for index in range(3):
        mine = p[group == index]
        one = drawn.group(index)
        assert one.expected == pytest.approx(np.full_like(one.expected, mine.sum()))
        quantiles = np.quantile(one.counts, [0.05, 0.5, 0.95], method="inverted_cdf")
        cdf = stats.poisson_binom.cdf(np.arange(mine.size + 1), mine)
        expected = [np.argmax(cdf >= q) for q in (0.05, 0.5, 0.95)]
        assert np.abs(quantiles - expected).max() <= 1
    whole = drawn.whole()
    assert whole.counts.mean() == pytest.approx(p.sum(), rel=0.01)
    # the stopping probability from the draws: the share of drawn X at or below V (1 - target) / target
    assert recall_reached_probability(300, None, 0.9, drawn=whole) == pytest.approx(
        stats.poisson_binom.cdf(33, p), abs=0.01)
