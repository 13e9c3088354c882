"""LVHQ (DisastIR 4.3): the systems' ranking by their mean over one query set against their ranking over another,
Kendall's tau counted by hand from concordant and discordant pairs, and the two bootstraps (twin pairs resampled
together, or each set's queries on their own) against a plain loop over the draws."""
import numpy as np
import pytest
from scipy.stats import kendalltau

from models_llm.metrics.bootstrap import percentile_interval
from models_llm.systems.agreement import query_set_agreement, system_agreement

SYSTEMS = ["bm25", "dense", "hybrid", "random"]
# nDCG@10 of each system (rows) on the human-written queries (3) and on the LLM-generated ones (4): different
# queries, different counts.
HUMAN = np.array([[0.6, 0.4, 0.5],
                  [0.9, 0.7, 0.8],
                  [0.8, 0.9, 0.7],
                  [0.1, 0.2, 0.0]])
LLM = np.array([[0.5, 0.7, 0.6, 0.6],
                [0.7, 0.9, 0.7, 0.7],
                [0.9, 0.8, 0.8, 0.9],
                [0.2, 0.0, 0.1, 0.1]])


def test_lvhq_tau_by_hand():
    found = query_set_agreement(SYSTEMS, HUMAN, LLM, draws=0)
    # Means on the human set: bm25 0.5, dense 0.8, hybrid 0.8, random 0.1 (dense and hybrid tie);
    # on the LLM set: bm25 0.6, dense 0.75, hybrid 0.85, random 0.1.
    # Pairs (6): bm25-dense +/+ concordant, bm25-hybrid concordant, bm25-random concordant, dense-hybrid tied under
    # the human set (neither), dense-random concordant, hybrid-random concordant: C = 5, D = 0.
    # tau-b = (C - D) / sqrt((n0 - n1) (n0 - n2)), n0 = 6 pairs, n1 = 1 pair tied in the human set, n2 = 0.
    assert found.kendall_tau == pytest.approx(5 / np.sqrt(5 * 6))
    assert found.kendall_tau == pytest.approx(kendalltau(HUMAN.mean(axis=1), LLM.mean(axis=1)).statistic)
    assert found.n_systems == 4 and found.n_queries == 7
    # dense shares first place with hybrid on the human set and is second on the LLM set.
    assert found.largest_change == ("dense", 1, 2)
    # hybrid at 0.7 on the human set: dense > hybrid > bm25 > random there, hybrid > dense > bm25 > random on the
    # LLM set. dense-hybrid is now discordant, the other 5 pairs concordant, no tie: tau = (5 - 1) / 6.
    human = HUMAN.copy()
    human[2] = [0.7, 0.8, 0.6]
    found = query_set_agreement(SYSTEMS, human, LLM, draws=0)
    assert found.kendall_tau == pytest.approx((5 - 1) / 6)
    # tau_AP (Yilmaz et al.) by hand, the human set as reference: the LLM order hybrid, dense, bm25, random;
    # C(2) = 0 (hybrid above dense, the human set has dense above), C(3) = 2, C(4) = 3:
    # 2 / 3 * (0 / 1 + 2 / 2 + 3 / 3) - 1 = 1 / 3.
    assert found.tau_ap == pytest.approx(1 / 3)


def test_lvhq_twins_resample_pairs_and_sets_resample_on_their_own():
    paired = query_set_agreement(SYSTEMS, HUMAN, LLM[:, :3], paired=True, draws=200, seed=3)
    # Twin pairs: the same draw for both sets, exactly qrels agreement's bootstrap over the pairs.
    same = system_agreement(SYSTEMS, HUMAN, LLM[:, :3], draws=200, seed=3)
    assert paired.intervals == same.intervals and paired.n_queries == 3

    found = query_set_agreement(SYSTEMS, HUMAN, LLM, draws=300, seed=5)
    rng_a, rng_b = (np.random.default_rng(child) for child in np.random.SeedSequence(5).spawn(2))
    taus = []
    for _ in range(300):
        pick_a = rng_a.multinomial(3, np.full(3, 1 / 3))
        pick_b = rng_b.multinomial(4, np.full(4, 1 / 4))
        tau = kendalltau(HUMAN @ pick_a / 3, LLM @ pick_b / 4).statistic
        taus.append(tau)
    assert found.intervals["kendall_tau"] == pytest.approx(percentile_interval(np.array(taus)))


def test_lvhq_leaves_out_undefined_queries_and_needs_three_systems():
    human = HUMAN.copy()
    human[1, 2] = np.nan  # a query one system lacks a value for is left out of the set
    found = query_set_agreement(SYSTEMS, human, LLM, draws=0)
    assert found.n_queries == 6
    assert found.kendall_tau == pytest.approx(kendalltau(human[:, :2].mean(axis=1), LLM.mean(axis=1)).statistic)
    assert query_set_agreement(SYSTEMS[:2], HUMAN[:2], LLM[:2]) is None
    with pytest.raises(ValueError, match="twin pairs"):
        query_set_agreement(SYSTEMS, HUMAN, LLM, paired=True)
