"""Percentile confidence intervals by resampling queries with replacement: each draw is a vector of
per-query counts, and every metric with a `draw` in the registry is recombined from per-query sufficient
statistics, not recomputed."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from models_llm.metrics.query_stats import QueryStats, Resampled
from models_llm.metrics.registry import BOOTSTRAPPED

# Draws are taken in blocks of at most this many (draw, query) cells, so that memory stays bounded when
# there are tens of thousands of queries.
BLOCK_CELLS = 4_000_000


def resampling_counts(n_queries: int, draws: int, seed: int) -> Iterator[np.ndarray]:
    """Blocks of rows, `draws` rows in all: how often each of n_queries queries is picked when n_queries are
    drawn with replacement. The blocks are consecutive rows of one multinomial sample from `seed`."""
    rng = np.random.default_rng(seed)
    block = max(1, BLOCK_CELLS // n_queries)
    for start in range(0, draws, block):
        size = min(block, draws - start)
        yield rng.multinomial(n_queries, np.full(n_queries, 1.0 / n_queries), size=size).astype(float)


def _block_draws(stats: QueryStats, weights: np.ndarray) -> dict[str, np.ndarray]:
    block = Resampled(stats, weights)
    return {metric.key: metric.draw(block) for metric in BOOTSTRAPPED}


def bootstrap_draws(stats: QueryStats, draws: int, seed: int) -> dict[str, np.ndarray]:
    """Each bootstrapped metric's value in every draw (nan where a draw leaves it undefined, e.g. no relevant
    pair)."""
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
