"""DIRAS Table 5's per-query Kendall tau-b, checked against tau-b counted by hand here and against
scipy.stats.kendalltau(variant='b'), the function the DIRAS code calls."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from models_llm.systems.pair_tau import pair_kendall_tau


def test_per_query_tau_b_over_the_shared_pairs_and_their_mean():
    scores = {
        # q1: four pairs; (d3, d4) is the one discordant pair of six: (5 - 1) / 6.
        "q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0, "d4": 0.0, "d9": 5.0},  # d9: the judge has no P for it
        # q2: a tie in the scores (d1, d2): n0 = 3, one tied pair in x, concordant (d1, d3), (d2, d3):
        # tau_b = 2 / sqrt((3 - 1) * (3 - 0)).
        "q2": {"d1": 1.0, "d2": 1.0, "d3": 0.0},
        "q3": {"d1": 1.0},  # one pair: no tau
        "q4": {"d1": 2.0, "d2": 1.0},  # P all tied: no tau
    }
    p = {"q1": {"d1": 0.9, "d2": 0.8, "d3": 0.1, "d4": 0.5, "d7": 0.3},
         "q2": {"d1": 0.9, "d2": 0.8, "d3": 0.5},
         "q3": {"d1": 0.7},
         "q4": {"d1": 0.5, "d2": 0.5}}
    found = pair_kendall_tau(scores, p)
    by_query = {row.query: row for row in found.queries}
    assert by_query["q1"].pairs == 4 and by_query["q1"].tau == pytest.approx(4 / 6)
    assert by_query["q2"].tau == pytest.approx(2 / math.sqrt(6))
    assert by_query["q3"].tau is None and by_query["q4"].tau is None and found.undefined == 2
    assert found.mean == pytest.approx((4 / 6 + 2 / math.sqrt(6)) / 2)
    assert found.pairs == 4 + 3 + 1 + 2


def test_it_matches_scipy_on_random_rankings_with_ties():
    rng = np.random.default_rng(5)
    scores, p, expected = {}, {}, []
    for q in range(6):
        x = rng.integers(0, 5, size=12).astype(float)
        y = rng.random(12).round(1)
        scores[f"q{q}"] = {f"d{i}": x[i] for i in range(12)}
        p[f"q{q}"] = {f"d{i}": y[i] for i in range(12)}
        expected.append(stats.kendalltau(x, y, variant="b").statistic)
    found = pair_kendall_tau(scores, p)
    assert [row.tau for row in found.queries] == pytest.approx(expected)
    assert found.mean == pytest.approx(np.mean(expected))


def test_no_shared_pairs_gives_no_mean():
    found = pair_kendall_tau({"q1": {"d1": 1.0, "d2": 0.5}}, {"q2": {"d1": 0.4}})
    assert found.mean is None and found.queries[0].pairs == 0 and found.undefined == 1
