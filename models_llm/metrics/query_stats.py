"""Per-query sufficient statistics of the bootstrapped metrics, and those metrics recombined from them over a
block of draws, each draw a vector of how often every query was picked."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy import sparse

from models_llm.metrics.calibration_error import equal_width_bin_index
from models_llm.metrics.classification import Confusion, ratio

ECE_BINS = 10
# Above this many distinct P values the AUROC histograms use quantile bins; pairs sharing a bin then count
# as tied (half a win), which moves a draw's AUROC by at most the share of such pairs.
AUROC_MAX_BINS = 2000


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


@dataclass(frozen=True)
class Resampled:
    """A block of bootstrap draws: `weights` has a row per draw and a column per query (how often it was
    picked). Each method gives a metric's value in every draw (nan where a draw leaves it undefined)."""

    stats: QueryStats
    weights: np.ndarray

    @cached_property
    def confusion(self) -> Confusion:
        return Confusion.from_columns(self.weights @ self.stats.confusion)

    def auroc(self) -> np.ndarray:
        hist = (self.stats.auroc_hist.T @ self.weights.T).T
        half = hist.shape[1] // 2
        pos, neg = hist[:, :half], hist[:, half:]
        neg_below = np.cumsum(neg, axis=1) - neg
        wins = (pos * (neg_below + 0.5 * neg)).sum(axis=1)
        return ratio(wins, pos.sum(axis=1) * neg.sum(axis=1))

    def ece(self) -> np.ndarray:
        count, sum_p, sum_y = np.split(self.weights @ self.stats.ece_bins, 3, axis=1)
        return ratio(np.abs(sum_p - sum_y).sum(axis=1), count.sum(axis=1))

    def query_mean(self, values: np.ndarray) -> np.ndarray:
        """The mean of a per-query value over the drawn queries where it is defined."""
        defined = np.isfinite(values)
        return ratio(self.weights[:, defined] @ values[defined], self.weights[:, defined].sum(axis=1))
