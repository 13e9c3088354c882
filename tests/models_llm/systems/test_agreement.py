"""System-ranking agreement: tau-b and Spearman against scipy, tau_AP against hand computations and a brute
force over the orders of tied systems, the largest rank change, and the bootstrap intervals."""
from itertools import permutations, product

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from models_llm.systems.agreement import COEFFICIENTS, _tau_ap_rows, system_agreement, tau_ap


def tie_credit(a, b):
    """What j, placed above x, adds to C: 1 when a ranks j above x, 1/2 when a alone ties them, 1 when both do."""
    def credit(j, x):
        if a[j] > a[x]:
            return 1.0
        if a[j] == a[x]:
            return 1.0 if b[j] == b[x] else 0.5
        return 0.0
    return credit


def plain_tau_ap(reference_rank_above, order):
    """tau_AP of one strict order (system indices, best first) with credit(j, x) for j placed above x."""
    n = len(order)
    total = sum(sum(reference_rank_above(j, order[i]) for j in order[:i]) / i for i in range(1, n))
    return 2 * total / (n - 1) - 1


def test_tau_ap_by_hand():
    a = np.array([4.0, 3.0, 2.0, 1.0])  # reference: A > B > C > D
    assert tau_ap(a, a) == pytest.approx(1.0)
    assert tau_ap(a, -a) == pytest.approx(-1.0)
    # b orders B, A, C, D. Position 2 (A): B above, which a ranks below A: C(2) = 0. Position 3 (C): B, A both
    # above C in a: 2 / 2. Position 4 (D): 3 / 3. tau_AP = 2/3 (0 + 1 + 1) - 1 = 1/3.
    assert tau_ap(a, np.array([3.0, 4.0, 2.0, 1.0])) == pytest.approx(1 / 3)
    # b orders A, B, D, C: 1/1, 2/2, then C under A, B, D with a ranking A, B above C: 2/3.
    # tau_AP = 2/3 (1 + 1 + 2/3) - 1 = 7/9: the same swap costs less at the bottom (Kendall's tau: 2/3 for both).
    assert tau_ap(a, np.array([4.0, 3.0, 1.0, 2.0])) == pytest.approx(7 / 9)
    assert kendalltau(a, [3.0, 4.0, 2.0, 1.0]).statistic == pytest.approx(kendalltau(a, [4, 3, 1, 2]).statistic)
    assert tau_ap(np.array([1.0, 2.0]), np.array([2.0, 1.0])) == pytest.approx(-1.0)


def test_tau_ap_with_ties_is_the_mean_over_the_tie_orders():
    rng = np.random.default_rng(4)
    for _ in range(40):
        n = int(rng.integers(2, 7))
        a = rng.integers(0, 3, n).astype(float)
        b = rng.integers(0, 3, n).astype(float)

        # Every order of the systems that agrees with b's strict preferences, each as likely.
        orders = [order for order in permutations(range(n))
                  if all(b[order[i]] >= b[order[i + 1]] for i in range(n - 1))]
        expected = np.mean([plain_tau_ap(tie_credit(a, b), order) for order in orders])
        assert tau_ap(a, b) == pytest.approx(expected, abs=1e-12), (a, b)
    # Identical rankings with a tie agree fully.
    tied = np.array([3.0, 2.0, 2.0, 1.0])
    assert tau_ap(tied, tied) == pytest.approx(1.0)


@pytest.mark.parametrize("coarse", [False, True])
def test_coefficients_equal_scipy_and_the_rank_change(coarse):
    # Coarse values tie many means.
    rng = np.random.default_rng(7)
    systems = [f"s{i}" for i in range(8)]
    a = rng.random((8, 50))
    b = a + rng.normal(0, 0.3, (8, 50))
    if coarse:
        a, b = np.round(a * 50) / 50 * (np.arange(50) < 1), np.round(b * 3) / 3 * (np.arange(50) < 1)
    agreement = system_agreement(systems, a, b, draws=0)
    mean_a, mean_b = a.mean(axis=1), b.mean(axis=1)
    assert agreement.kendall_tau == pytest.approx(kendalltau(mean_a, mean_b).statistic, abs=1e-12)
    assert agreement.spearman == pytest.approx(spearmanr(mean_a, mean_b).statistic, abs=1e-12)
    assert agreement.tau_ap == pytest.approx(tau_ap(mean_a, mean_b), abs=1e-12)
    assert (agreement.n_systems, agreement.n_queries) == (8, 50)
    assert agreement.intervals == {name: None for name in COEFFICIENTS}
    # By hand: ranks (1 = best) under each source, the largest move.
    rank_a = {s: 1 + int((mean_a > m).sum()) for s, m in zip(systems, mean_a)}
    rank_b = {s: 1 + int((mean_b > m).sum()) for s, m in zip(systems, mean_b)}
    system, under_a, under_b = agreement.largest_change
    assert (under_a, under_b) == (rank_a[system], rank_b[system])
    assert abs(under_a - under_b) == max(abs(rank_a[s] - rank_b[s]) for s in systems) > 0


def test_largest_change_by_hand_and_none_when_nothing_moves():
    a = np.array([[0.9], [0.8], [0.7], [0.1]])
    b = np.array([[0.9], [0.75], [0.7], [0.8]])  # A stays first, B 2 -> 3, C 3 -> 4, D 4 -> 2
    agreement = system_agreement(["A", "B", "C", "D"], a, b, draws=0)
    assert agreement.largest_change == ("D", 4, 2)
    # Equal moves (B 2 -> 4, D 4 -> 2): the first system named.
    b = np.array([[0.9], [0.2], [0.7], [0.8]])
    assert system_agreement(["A", "B", "C", "D"], a, b, draws=0).largest_change == ("B", 2, 4)
    assert system_agreement(["A", "B", "C", "D"], a, a * 2, draws=0).largest_change is None


def test_undefined_queries_and_too_few_systems():
    a = np.array([[0.5, np.nan, 0.2, 0.4], [0.1, 0.3, 0.6, 0.2], [0.9, 0.8, 0.7, 0.6]])
    b = np.array([[0.4, 0.1, 0.2, np.nan], [0.2, 0.2, 0.5, 0.1], [0.8, 0.9, 0.7, 0.5]])
    agreement = system_agreement(["x", "y", "z"], a, b, draws=0)
    kept = [0, 2]  # the queries every system has under both sources
    assert agreement.n_queries == 2
    assert agreement.kendall_tau == pytest.approx(kendalltau(a[:, kept].mean(1), b[:, kept].mean(1)).statistic)
    constant = system_agreement(["x", "y", "z"], a, np.ones_like(b), draws=0)
    assert np.isnan(constant.kendall_tau) and np.isnan(constant.spearman)
    assert system_agreement(["x"], a[:1], b[:1]) is None
    assert system_agreement(["x", "y"], a[:2, 1:2], b[:2, 1:2]) is None
    # Two systems with every query defined: a rank correlation of two is +1 or -1 whatever the sources say.
    assert system_agreement(["x", "y"], a[:2, [0, 2]], b[:2, [0, 2]]) is None
    with pytest.raises(ValueError):
        system_agreement(["x", "y"], a, b)


def test_bootstrap_intervals_contain_the_point_values():
    rng = np.random.default_rng(11)
    systems = [f"s{i}" for i in range(6)]
    quality = np.linspace(0.2, 0.7, 6)[:, None]
    a = quality + rng.normal(0, 0.2, (6, 80))
    b = quality + rng.normal(0, 0.2, (6, 80))
    agreement = system_agreement(systems, a, b, draws=400, seed=3)
    for name in COEFFICIENTS:
        low, high = agreement.intervals[name]
        assert -1 <= low <= getattr(agreement, name) <= high <= 1, name
    # The draws' coefficients are scipy's too: with one query the only draw is that query.
    one = system_agreement(systems, a[:, :1], b[:, :1], draws=5)
    assert one.intervals["kendall_tau"] == pytest.approx((kendalltau(a[:, 0], b[:, 0]).statistic,) * 2)
    assert one.intervals["spearman"] == pytest.approx((spearmanr(a[:, 0], b[:, 0]).statistic,) * 2)
    # Identical sources agree in every draw.
    same = system_agreement(systems, a, a, draws=100)
    assert all(same.intervals[name] == pytest.approx((1.0, 1.0)) for name in COEFFICIENTS)
    # The same seed gives the same draws.
    assert system_agreement(systems, a, b, draws=400, seed=3).intervals == agreement.intervals


def test_all_pairs_of_three_systems_brute_force():
    # Every strict ranking pair of three systems: tau_AP from the definition directly.
    for order_a, order_b in product(permutations(range(3)), repeat=2):
        a = np.empty(3)
        b = np.empty(3)
        a[list(order_a)] = [3, 2, 1]
        b[list(order_b)] = [3, 2, 1]
        expected = plain_tau_ap(tie_credit(a, b), list(order_b))
        assert tau_ap(a, b) == pytest.approx(expected, abs=1e-12)


def test_bootstrap_tau_ap_rows_equal_tau_ap_one_by_one():
    """The bootstrap's tau_AP over many draws at once (rows without ties together, the others one by one) gives
    what tau_AP gives draw by draw, ties or not."""
    rng = np.random.default_rng(7)
    for n in (2, 3, 7, 12):
        a = rng.random((200, n))
        b = a + rng.normal(0, 0.3, (200, n))
        b[:15, 0] = b[:15, 1]
        a[15:25, 2 % n] = a[15:25, 0]
        expected = np.array([tau_ap(row_a, row_b) for row_a, row_b in zip(a, b)])
        np.testing.assert_allclose(_tau_ap_rows(a, b), expected, atol=1e-12)
