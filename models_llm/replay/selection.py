"""The queues' selection rules as pure functions over arrays: which strategy of a mix serves next (the deficit
rule) and, per strategy, the order in which it hands out pairs. The live queue (labeling.selectors.queues) reads
the same rules from the database; the replay (models_llm.replay.engine) runs them over a project's arrays.

Every order is over pool positions and breaks ties by pair id, as the live queries do (`order_by(..., "pair_id")`).
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

DECILES = 10
SELECTION_STRATEGIES = ("uncertain", "disagreement", "random", "stratified")


def mix_order(shares: Mapping[str, float], served: Mapping[str, int]) -> list[str]:
    """The mix's strategies, the one furthest below its share of the items served so far first (with 80 uncertain /
    20 random, every fifth item comes from random). Ties go to the larger share, then to the name."""
    total_share = sum(shares.values())
    done = sum(served.get(name, 0) for name in shares) + 1
    deficit = {name: share / total_share * done - served.get(name, 0) for name, share in shares.items()}
    return sorted(shares, key=lambda name: (-deficit[name], -shares[name], name))


def uncertain_order(raw_p: np.ndarray, pair_ids: np.ndarray) -> np.ndarray:
    """Positions of the judged pairs (P not nan), P closest to 0.5 first."""
    judged = np.flatnonzero(~np.isnan(raw_p))
    return judged[np.lexsort((pair_ids[judged], np.abs(raw_p[judged] - 0.5)))]


def disagreement(raw_p: np.ndarray, within: np.ndarray | None = None) -> np.ndarray:
    """Each pair's disagreement: the spread of P over the judges (rows of `raw_p`, nan: not judged) where at least two
    judged it, or the spread among an ensemble judge's own members (`within`, nan or 0: none) when that is larger; a
    pair fewer than two judges scored has only its `within` spread."""
    raw = np.atleast_2d(np.asarray(raw_p, dtype=float))
    missing = np.isnan(raw)
    judged = (~missing).sum(axis=0)
    across = np.where(missing, -np.inf, raw).max(axis=0) - np.where(missing, np.inf, raw).min(axis=0)
    own = np.zeros(raw.shape[1]) if within is None else np.nan_to_num(np.asarray(within, dtype=float), nan=0.0)
    return np.where(judged >= 2, np.maximum(np.where(judged >= 2, across, 0.0), own), own)


def disagreement_order(spread: np.ndarray, pair_ids: np.ndarray) -> np.ndarray:
    """Positions of the pairs with a disagreement above 0 (`disagreement`), the largest first."""
    found = np.flatnonzero(spread > 0)
    return found[np.lexsort((pair_ids[found], -spread[found]))]


def random_order(key: np.ndarray, pair_ids: np.ndarray) -> np.ndarray:
    """Every position in the random order: by the pairs' random order key (uniform, drawn once per pair)."""
    return np.lexsort((pair_ids, key))


def decile_of(p: np.ndarray) -> np.ndarray:
    """The decile of P each pair falls in, as the stratified queue counts them (nan: -1)."""
    out = np.full(p.shape, -1, dtype=np.int64)
    judged = ~np.isnan(p)
    out[judged] = np.minimum((p[judged] * DECILES).astype(np.int64), DECILES - 1)
    return out


def decile_orders(raw_p: np.ndarray, key: np.ndarray, pair_ids: np.ndarray) -> list[np.ndarray]:
    """Per decile of P ([d/10, (d+1)/10), the last one closed), its pairs' positions in the random order."""
    orders = []
    for decile in range(DECILES):
        low, high = decile / DECILES, (decile + 1) / DECILES
        with np.errstate(invalid="ignore"):
            inside = (raw_p >= low) & ((raw_p <= high) if decile == DECILES - 1 else (raw_p < high))
        found = np.flatnonzero(inside)
        orders.append(found[np.lexsort((pair_ids[found], key[found]))])
    return orders


def stratified_deciles(counts: np.ndarray) -> list[int]:
    """The deciles in the order the stratified queue tries them: the fewest stratified labels first, then the
    lower decile."""
    return sorted(range(DECILES), key=lambda d: (int(counts[d]), d))
