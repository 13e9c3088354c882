"""Ranking metrics of judge_report: nDCG/MAP against rank_eval's own Qrels/Run path, a hand-worked nDCG,
tie-aware expectations against every order of the tied pairs, and Kendall's tau-b against scipy."""
from itertools import permutations, product

import numpy as np
import pytest
from rank_eval import Qrels, Run, evaluate
from scipy.stats import kendalltau

from models_llm.metrics import ScaleSpec, judge_report
from models_llm.metrics.judge_data import QueryLayout
from models_llm.metrics.ranking import query_ranking
from tests.models_llm.synthetic import SCALE, judge, random_judge, rank_eval_reference


@pytest.mark.parametrize("coarse", [False, True])
def test_per_query_scores_equal_rank_eval_qrels_and_run(coarse):
    # Coarse P has many ties: rank_eval breaks them with an unstable sort, which must be reproduced exactly.
    data = random_judge(seed=21, n=2500, queries=40, coarse=coarse)
    reference = rank_eval_reference(data)
    ranking = query_ranking(QueryLayout.of(data.query), data.p, data.gold, SCALE.gain_of(data.gold),
                            data.gold >= 1)
    for ours, metric in ((ranking.ndcg, "ndcg"), (ranking.ndcg_at[10], "ndcg@10"), (ranking.ap, "map"),
                         (ranking.ap_at[10], "map@10")):
        np.testing.assert_allclose(ours, reference[metric], rtol=0, atol=1e-12, err_msg=metric)
    report = judge_report(data, SCALE, bootstrap_draws=0)
    assert report["ndcg"] == pytest.approx(reference["ndcg"].mean(), abs=1e-12)
    assert report["map@10"] == pytest.approx(reference["map@10"].mean(), abs=1e-12)
    assert report["info_avg"] == pytest.approx((reference["ndcg"].mean() + reference["map"].mean()) / 2, abs=1e-12)


def test_hand_worked_ndcg_and_ap():
    # One query, grades 2, 0, 1, 0 (gains 1, 0, 0.5, 0) with P 0.6, 0.9, 0.3, 0.1.
    # Ranked by P: gain 0 (P 0.9), gain 1 (0.6), gain 0.5 (0.3), gain 0 (0.1).
    # DCG = 0/log2(2) + 1/log2(3) + 0.5/log2(4) + 0/log2(5) = 0.630930 + 0.25 = 0.880930.
    # Ideal order 1, 0.5, 0, 0: IDCG = 1/log2(2) + 0.5/log2(3) = 1 + 0.315465 = 1.315465.
    # nDCG = 0.880930 / 1.315465 = 0.669672. (A 0.5 gain truncated to 0 would give 0.630930.)
    # Relevant (grade >= 1) at ranks 2 and 3: AP = (1/2 + 2/3) / 2 = 0.583333.
    report = judge_report(judge([1] * 4, [2, 0, 1, 0], [0.6, 0.9, 0.3, 0.1]), SCALE, bootstrap_draws=0)
    dcg, idcg = 1 / np.log2(3) + 0.5 / 2, 1 + 0.5 / np.log2(3)
    assert report["ndcg"] == pytest.approx(dcg / idcg, abs=1e-12)
    assert report["ndcg"] == pytest.approx(0.669672, abs=1e-6)
    assert report["ndcg@10"] == report["ndcg"]
    assert report["map"] == pytest.approx((1 / 2 + 2 / 3) / 2, abs=1e-12)
    assert report["ndcg_tie_aware"] == report["ndcg"] and report["map_tie_aware"] == report["map"]
    assert report["tie_warning"] is False


def test_hand_worked_tie():
    # Two pairs with the same P, gains 0 and 1. Either order is as likely:
    # gain 1 first: DCG = 1, AP = 1; gain 1 second: DCG = 1/log2(3) = 0.630930, AP = 1/2.
    # Expected nDCG = (1 + 0.630930) / 2 = 0.815465 (IDCG = 1); expected AP = 0.75.
    report = judge_report(judge([1, 1], [0, 2], [0.7, 0.7]), SCALE, bootstrap_draws=0)
    assert report["ndcg_tie_aware"] == pytest.approx((1 + 1 / np.log2(3)) / 2, abs=1e-12)
    assert report["map_tie_aware"] == pytest.approx(0.75, abs=1e-12)
    assert report["ndcg"] in (pytest.approx(1.0), pytest.approx(1 / np.log2(3)))
    assert report["tie_warning"] is True


def expected_over_tie_orders(gold, p) -> tuple[float, float]:
    """Mean rank_eval nDCG and AP over every order of the pairs that keeps P descending (ties permuted)."""
    levels = sorted(set(p), reverse=True)
    groups = [[i for i in range(len(p)) if p[i] == level] for level in levels]
    orders = [sum(choice, []) for choice in product(*(map(list, permutations(g)) for g in groups))]
    ids = [f"d{i}" for i in range(len(p))]
    names = [f"o{k:04d}" for k in range(len(orders))]
    qrels, qrels_binary, run = Qrels(), Qrels(), Run()
    qrels.add_multi(names, [ids] * len(orders), [[int(2 * SCALE.gains[g]) for g in gold]] * len(orders))
    qrels_binary.add_multi(names, [ids] * len(orders), [[int(g >= 1) for g in gold]] * len(orders))
    # Distinct scores len(p), len(p) - 1, ... fix each order exactly.
    run.add_multi(names, [[ids[i] for i in order] for order in orders], [list(range(len(p), 0, -1))] * len(orders))
    return evaluate(qrels, run, "ndcg"), evaluate(qrels_binary, run, "map")


def test_tie_aware_equals_the_mean_over_all_tie_orders():
    rng = np.random.default_rng(8)
    queries, gold, p, expected = [], [], [], []
    for q in range(6):
        size = int(rng.integers(3, 8))
        g = rng.integers(0, 3, size).tolist()
        g[0] = max(g[0], 1)  # every query has a relevant pair, so both metrics are defined for all
        scores = rng.choice([0.2, 0.5, 0.8], size).tolist()
        queries += [q] * size
        gold += g
        p += scores
        expected.append(expected_over_tie_orders(g, scores))
    report = judge_report(judge(queries, gold, p), SCALE, bootstrap_draws=0)
    assert report["ndcg_tie_aware"] == pytest.approx(np.mean([e[0] for e in expected]), abs=1e-12)
    assert report["map_tie_aware"] == pytest.approx(np.mean([e[1] for e in expected]), abs=1e-12)


def test_tie_aware_equals_plain_without_ties():
    seeded = random_judge(seed=4, n=1500, queries=20)
    p = np.random.default_rng(4).random(1500)
    assert np.unique(p).size == p.size
    data = judge(seeded.query, seeded.gold, p)
    ranking = query_ranking(QueryLayout.of(data.query), data.p, data.gold, SCALE.gain_of(data.gold), data.gold >= 1)
    np.testing.assert_allclose(ranking.ndcg_tie_aware, ranking.ndcg, rtol=0, atol=1e-12)
    np.testing.assert_allclose(ranking.ap_tie_aware, ranking.ap, rtol=0, atol=1e-12)


def test_queries_without_relevant_pairs_are_left_out_of_the_means():
    # Query 1 has only grade-0 pairs: rank_eval scores it 0, which says nothing about the ranking.
    data = judge([1, 1, 1, 2, 2], [2, 0, 1, 0, 0], [0.9, 0.5, 0.7, 0.3, 0.8])
    report = judge_report(data, SCALE, bootstrap_draws=0)
    reference = rank_eval_reference(data)
    assert reference["ndcg"][1] == 0.0 and reference["map"][1] == 0.0
    assert report["ndcg"] == reference["ndcg"][0] == pytest.approx(1.0)
    assert report["map"] == reference["map"][0] == pytest.approx(1.0)
    assert (report["n_queries_ndcg"], report["n_queries_map"], report["n_queries"]) == (1, 1, 2)


def test_kendall_tau_is_the_mean_of_scipy_tau_b_over_queries_where_defined():
    data = random_judge(seed=9, n=800, queries=12, coarse=True)
    # Make one query constant in P: tau-b is undefined there and must be skipped, not counted as 0 or nan.
    constant = data.query == data.query[0]
    p = np.where(constant, 0.5, data.p)
    data = judge(data.query, data.gold, p)
    taus = []
    for q in np.unique(data.query):
        rows = data.query == q
        if np.unique(p[rows]).size > 1 and np.unique(data.gold[rows]).size > 1:
            taus.append(kendalltau(p[rows], data.gold[rows], variant="b").statistic)
    assert len(taus) == 11
    report = judge_report(data, SCALE, bootstrap_draws=0)
    assert report["kendall_tau"] == pytest.approx(np.mean(taus), abs=1e-12)


def test_kendall_tau_per_query_matches_scipy_on_a_four_grade_scale():
    rng = np.random.default_rng(12)
    n = 3000
    query = rng.integers(0, 60, n)
    gold = rng.integers(0, 4, n)
    gold[query == 5] = 2  # constant grade: undefined, skipped
    p = np.clip(gold / 3 + rng.normal(0, 0.3, n), 0, 1)
    p[query % 2 == 0] = np.round(p[query % 2 == 0], 1)  # ties in P for half of the queries
    scale = ScaleSpec(gains={0: 0, 1: 1, 2: 2, 3: 3}, relevant_from=2)
    ranking = query_ranking(QueryLayout.of(query), p, gold, scale.gain_of(gold), gold >= 2)
    for k, q in enumerate(np.unique(query)):
        rows = query == q
        if q == 5:
            assert np.isnan(ranking.kendall_tau[k])
        else:
            expected = kendalltau(p[rows], gold[rows], variant="b").statistic
            assert ranking.kendall_tau[k] == pytest.approx(expected, abs=1e-12)
