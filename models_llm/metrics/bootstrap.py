"""Percentile confidence intervals by resampling queries with replacement: each draw is a vector of
per-query counts, and every metric is recombined from per-query sufficient statistics, not recomputed."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from models_llm.metrics.calibration_error import equal_width_bin_index
from models_llm.metrics.classification import Confusion, ratio

ECE_BINS = 10
# Above this many distinct P values the AUROC histograms use quantile bins; pairs sharing a bin then count
# as tied (half a win), which moves a draw's AUROC by at most the share of such pairs.
AUROC_MAX_BINS = 2000
# Draws are taken in blocks of at most this many (draw, query) cells, so that memory stays bounded when
# there are tens of thousands of queries.
BLOCK_CELLS = 4_000_000


@dataclass(frozen=True)
class QueryStats:
    """Per-query sufficient statistics (one row per query) behind the bootstrapped metrics."""

    confusion: np.ndarray  # tp, fp, fn, tn
    ece_bins: np.ndarray  # per ECE bin: count, sum P, sum relevant (flattened, 3 * ECE_BINS columns)
    auroc_hist: sparse.csr_array  # relevant then non-relevant counts per P bin, P ascending
    ndcg: np.ndarray  # nan where undefined
    ap: np.ndarray

    @classmethod
    def collect(cls, code: np.ndarray, n_queries: int, p: np.ndarray, relevant: np.ndarray,
                predicted: np.ndarray, ndcg: np.ndarray, ap: np.ndarray) -> QueryStats:
        def per_query(cell: np.ndarray, width: int, weights=None) -> np.ndarray:
            flat = np.bincount(code * width + cell, weights=weights, minlength=n_queries * width)
            return flat.reshape(n_queries, width)

        # 2 * relevant + predicted is 3 for tp, 1 for fp, 2 for fn, 0 for tn; columns go tp, fp, fn, tn.
        confusion = per_query(np.array([3, 1, 2, 0])[2 * relevant + predicted], 4)
        ece_bin = equal_width_bin_index(p, ECE_BINS)
        ece_bins = np.hstack([
            per_query(ece_bin, ECE_BINS),
            per_query(ece_bin, ECE_BINS, p),
            per_query(ece_bin, ECE_BINS, relevant.astype(float)),
        ])
        values = np.unique(p)
        if values.size > AUROC_MAX_BINS:
            values = np.unique(np.quantile(p, np.linspace(0.0, 1.0, AUROC_MAX_BINS + 1)[1:]))
        p_bin = np.searchsorted(values, p)  # values ends at max(P), so every P has a bin
        # Sparse: a query's pairs touch few of the bins, and queries x bins can run to billions of cells.
        cell = p_bin + values.size * (~relevant)
        auroc_hist = sparse.coo_array(
            (np.ones(p.size), (code, cell)), shape=(n_queries, 2 * values.size)
        ).tocsr()
        return cls(confusion, ece_bins, auroc_hist, ndcg, ap)


def resampling_counts(n_queries: int, draws: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of rows, `draws` rows in all: how often each of n_queries queries is picked when n_queries are
    drawn with replacement. The blocks are consecutive rows of one multinomial sample from `seed`."""
    rng = np.random.default_rng(seed)
    block = max(1, BLOCK_CELLS // n_queries)
    for start in range(0, draws, block):
        size = min(block, draws - start)
        yield rng.multinomial(n_queries, np.full(n_queries, 1.0 / n_queries), size=size).astype(float)


def _auroc(hist: np.ndarray) -> np.ndarray:
    half = hist.shape[1] // 2
    pos, neg = hist[:, :half], hist[:, half:]
    neg_below = np.cumsum(neg, axis=1) - neg
    wins = (pos * (neg_below + 0.5 * neg)).sum(axis=1)
    return ratio(wins, pos.sum(axis=1) * neg.sum(axis=1))


def _ece(bins: np.ndarray) -> np.ndarray:
    count, sum_p, sum_y = np.split(bins, 3, axis=1)
    return ratio(np.abs(sum_p - sum_y).sum(axis=1), count.sum(axis=1))


def _query_mean(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    defined = np.isfinite(values)
    return ratio(weights[:, defined] @ values[defined], weights[:, defined].sum(axis=1))


def _block_draws(stats: QueryStats, weights: np.ndarray) -> dict[str, np.ndarray]:
    confusion = Confusion.from_columns(weights @ stats.confusion)
    return {
        "f1": confusion.f1(),
        "kappa_vs_gold": confusion.kappa(),
        "auroc": _auroc((stats.auroc_hist.T @ weights.T).T),
        "ece": _ece(weights @ stats.ece_bins),
        "ndcg": _query_mean(weights, stats.ndcg),
        "map": _query_mean(weights, stats.ap),
    }


def bootstrap_draws(stats: QueryStats, draws: int, seed: int) -> dict[str, np.ndarray]:
    """Each metric's value in every draw (nan where a draw leaves it undefined, e.g. no relevant pair)."""
    blocks = [_block_draws(stats, w) for w in resampling_counts(stats.confusion.shape[0], draws, seed)]
    return {metric: np.concatenate([block[metric] for block in blocks]) for metric in blocks[0]}


def percentile_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float] | None:
    """The central `level` percentile interval of the draws where the metric is defined."""
    defined = values[np.isfinite(values)]
    if defined.size == 0:
        return None
    tail = 50.0 * (1.0 - level)
    low, high = np.percentile(defined, [tail, 100.0 - tail])
    return float(low), float(high)
