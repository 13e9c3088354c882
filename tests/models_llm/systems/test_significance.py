"""Paired significance tests (#34) against independent references: scipy's t-test and Wilcoxon, an exact
enumeration of the randomization test on ten queries, statsmodels' Holm and Tukey HSD, and a hand computation of
the interval and effect size."""
from itertools import product

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.multicomp import pairwise_tukeyhsd
from statsmodels.stats.multitest import multipletests

from models_llm.systems.significance import SignificanceError, compare_runs, holm, randomization_p

RNG = np.random.default_rng(7)
NAMES = ["bm25", "dense", "cascade", "random"]


def scores(queries: int = 40) -> np.ndarray:
    base = RNG.uniform(0.1, 0.7, size=queries)
    return np.vstack([base, base + RNG.normal(0.03, 0.05, queries), base + RNG.normal(0.15, 0.08, queries),
                      RNG.uniform(0, 0.2, size=queries)])


def test_t_and_wilcoxon_are_scipys_on_the_same_per_query_scores():
    matrix = scores()
    for test, reference in (("t", lambda a, b: stats.ttest_rel(a, b).pvalue),
                            ("wilcoxon", lambda a, b: stats.wilcoxon(a, b).pvalue)):
        found = compare_runs(NAMES, matrix, test=test, correction="none")
        assert len(found.pairs) == 6
        for pair in found.pairs:
            a, b = matrix[NAMES.index(pair.a)], matrix[NAMES.index(pair.b)]
            assert pair.p == pytest.approx(reference(a, b), rel=1e-12) and pair.p_corrected == pair.p


def test_the_randomization_test_agrees_with_an_exact_enumeration_on_ten_queries():
    a = np.array([0.61, 0.42, 0.55, 0.30, 0.77, 0.48, 0.66, 0.35, 0.59, 0.50])
    b = np.array([0.52, 0.45, 0.41, 0.33, 0.60, 0.47, 0.50, 0.30, 0.61, 0.38])
    d = a - b
    observed = abs(d.mean())
    exact = np.mean([abs(np.mean(np.array(signs) * d)) >= observed - 1e-12 for signs in product((1, -1), repeat=10)])
    draws = 20_000
    p = randomization_p(d, draws=draws, seed=3)[0]
    error = np.sqrt(exact * (1 - exact) / draws)
    assert abs(p - exact) < 4 * error + 1 / draws, (p, exact)
    assert compare_runs(["a", "b"], np.vstack([a, b]), draws=draws, seed=3, correction="none").pairs[0].p == p
    assert randomization_p(np.zeros(10), draws=100)[0] == 1.0  # identical runs: every draw ties


def test_holm_is_statsmodels_and_tukey_hsd_is_statsmodels_pairwise_tukeyhsd():
    raw = [0.01, 0.04, 0.03, 0.005, 0.2, None, 0.04]
    known = [p for p in raw if p is not None]
    expected = iter(multipletests(known, method="holm")[1])
    assert holm(raw) == pytest.approx([None if p is None else next(expected) for p in raw])

    matrix = scores(25)
    found = compare_runs(NAMES, matrix, test="t", correction="tukey")
    table = pairwise_tukeyhsd(matrix.ravel(), np.repeat(NAMES, matrix.shape[1]))
    reference = {frozenset((a, b)): p for a, b, p in zip(
        [table.groupsunique[i] for i in table._multicomp.pairindices[0]],
        [table.groupsunique[j] for j in table._multicomp.pairindices[1]], table.pvalues)}
    for pair in found.pairs:
        assert pair.p_corrected == pytest.approx(reference[frozenset((pair.a, pair.b))], abs=1e-6)
    holmed = compare_runs(NAMES, matrix, test="t", correction="holm")
    assert [pair.p_corrected for pair in holmed.pairs] == pytest.approx(
        multipletests([pair.p for pair in holmed.pairs], method="holm")[1])


def test_the_interval_the_effect_size_and_the_runs_tied_with_the_best_by_hand():
    a = np.array([0.5, 0.6, 0.7, 0.4, 0.8])
    b = np.array([0.4, 0.6, 0.5, 0.5, 0.6])
    pair = compare_runs(["a", "b"], np.vstack([a, b]), test="t", correction="none").pairs[0]
    d = a - b
    half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / np.sqrt(5)
    assert (pair.mean_difference, pair.low, pair.high) == pytest.approx((d.mean(), d.mean() - half, d.mean() + half))
    assert pair.effect_size == pytest.approx(d.mean() / d.std(ddof=1))

    # The cascade is far ahead of all; dense is close behind bm25 but far behind the cascade.
    matrix = scores(60)
    found = compare_runs(NAMES, matrix, draws=5000)
    assert found.best == "cascade" and found.tied_with_best == ("cascade",)
    wobble = np.where(np.arange(60) % 2, 0.02, -0.02)  # up on half the queries, down on the others: no difference
    close = np.vstack([matrix[2], matrix[2] + wobble, matrix[3]])
    near = compare_runs(["cascade", "twin", "random"], close, draws=5000)
    assert set(near.tied_with_best) == {"cascade", "twin"} and "random" not in near.tied_with_best
    assert near.p_matrix()["twin"]["random"] < 0.05 and near.p_matrix()["twin"]["twin"] is None


def test_bad_choices_and_shapes_are_refused():
    for kwargs, message in (({"test": "sign"}, "test must be"), ({"correction": "bh"}, "correction must be"),
                            ({"draws": 0}, "draws must be"), ({"alpha": 1.5}, "alpha must be")):
        with pytest.raises(SignificanceError, match=message):
            compare_runs(["a", "b"], np.ones((2, 3)), **kwargs)
    with pytest.raises(SignificanceError, match="runs x queries"):
        compare_runs(["a", "b", "c"], np.ones((2, 3)))
    with pytest.raises(SignificanceError, match="finite"):
        compare_runs(["a", "b"], np.array([[1.0, np.nan], [0.0, 1.0]]))
