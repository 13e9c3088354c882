"""Query bootstrap: every draw's metric, recombined from per-query statistics, equals the metric recomputed
with scikit-learn / rank_eval on the explicitly resampled pairs; intervals are percentiles of the draws."""
import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score, f1_score, roc_auc_score

from models_llm.metrics import bootstrap, judge_report
from models_llm.metrics.bootstrap import QueryStats, bootstrap_draws, percentile_interval, resampling_counts
from models_llm.metrics.calibration_error import ece
from models_llm.metrics.judge_data import QueryLayout
from tests.models_llm.synthetic import SCALE, random_judge, rank_eval_reference


def draws_and_reference(data, draws=6, seed=5):
    layout = QueryLayout.of(data.query)
    relevant, predicted = data.relevant(SCALE), data.predicted_relevant()
    per_query = rank_eval_reference(data)
    stats = QueryStats.collect(layout.code, layout.n_queries, data.p, relevant, predicted,
                               per_query["ndcg"], per_query["map"])
    ours = bootstrap_draws(stats, draws, seed)
    counts = np.vstack(list(resampling_counts(layout.n_queries, draws, seed)))
    return layout, relevant, predicted, per_query, ours, counts


def resampled_rows(layout, counts_row) -> np.ndarray:
    """Row indices of the resampled data set: each query's pairs repeated as often as it was drawn."""
    return np.concatenate([np.repeat(np.flatnonzero(layout.code == q), int(c)) for q, c in enumerate(counts_row)])


def test_counts_draw_n_queries_with_replacement(monkeypatch):
    counts = np.vstack(list(resampling_counts(40, 1000, seed=1)))
    assert counts.shape == (1000, 40) and (counts.sum(axis=1) == 40).all()
    # Each query is drawn Binomial(40, 1/40) times: mean 1, and left out with probability (39/40)^40 = 0.363.
    assert counts.mean() == pytest.approx(1.0)
    assert (counts == 0).mean() == pytest.approx((39 / 40) ** 40, abs=0.01)
    # Blocks (here of 7 draws) are pieces of the same sample: the block size does not change the draws.
    monkeypatch.setattr(bootstrap, "BLOCK_CELLS", 7 * 40)
    blocks = list(resampling_counts(40, 1000, seed=1))
    assert len(blocks) == 143 and np.array_equal(np.vstack(blocks), counts)


def test_each_draw_equals_the_metrics_of_the_resampled_pairs():
    data = random_judge(seed=2, n=1500, queries=15, coarse=True)  # 11 distinct P: AUROC bins are exact
    layout, relevant, predicted, per_query, ours, counts = draws_and_reference(data)
    for d, row in enumerate(counts):
        rows = resampled_rows(layout, row)
        assert ours["f1"][d] == pytest.approx(f1_score(relevant[rows], predicted[rows]), abs=1e-12)
        assert ours["kappa_vs_gold"][d] == pytest.approx(cohen_kappa_score(relevant[rows], predicted[rows]), abs=1e-12)
        assert ours["auroc"][d] == pytest.approx(roc_auc_score(relevant[rows], data.p[rows]), abs=1e-12)
        assert ours["ece"][d] == pytest.approx(ece(data.p[rows], relevant[rows]), abs=1e-12)
        drawn = np.repeat(np.arange(layout.n_queries), row.astype(int))
        assert ours["ndcg"][d] == pytest.approx(per_query["ndcg"][drawn].mean(), abs=1e-12)
        assert ours["map"][d] == pytest.approx(per_query["map"][drawn].mean(), abs=1e-12)


def test_auroc_draws_with_quantile_bins_stay_close():
    data = random_judge(seed=3, n=6000, queries=20)  # ~5,000 distinct P: 2,000 quantile bins
    assert np.unique(data.p).size > 2000
    layout, relevant, _, _, ours, counts = draws_and_reference(data, draws=4)
    for d, row in enumerate(counts):
        rows = resampled_rows(layout, row)
        assert ours["auroc"][d] == pytest.approx(roc_auc_score(relevant[rows], data.p[rows]), abs=2e-3)


def test_report_intervals_are_percentiles_of_the_draws():
    data = random_judge(seed=6, n=2000, queries=25)
    report = judge_report(data, SCALE, bootstrap_draws=300, seed=9)
    layout = QueryLayout.of(data.query)
    per_query = rank_eval_reference(data)
    stats = QueryStats.collect(layout.code, layout.n_queries, data.p, data.relevant(SCALE),
                               data.predicted_relevant(), per_query["ndcg"], per_query["map"])
    samples = bootstrap_draws(stats, 300, 9)
    for metric in ("f1", "auroc", "ece", "ndcg", "map", "kappa_vs_gold"):
        low, high = report["ci"][metric]
        assert [low, high] == pytest.approx(list(percentile_interval(samples[metric])), abs=1e-12)
        assert low < report[metric] < high
    again = judge_report(data, SCALE, bootstrap_draws=300, seed=9)
    other = judge_report(data, SCALE, bootstrap_draws=300, seed=10)
    assert again["ci"] == report["ci"] != other["ci"]


def test_percentile_interval_skips_undefined_draws():
    # 2.5th and 97.5th percentiles of 1..101 by linear interpolation: 1 + 0.025 * 100 = 3.5 and 98.5.
    values = np.concatenate([np.arange(1.0, 102.0), [np.nan, np.nan]])
    assert percentile_interval(values) == pytest.approx((3.5, 98.5), abs=1e-12)
    assert percentile_interval(np.array([np.nan])) is None
