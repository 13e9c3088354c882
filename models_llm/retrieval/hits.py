"""What every retriever returns (the ranked corpus positions per query) and the one top-k rule they share."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

# (done, total), called now and then during long work; it may raise to cancel the work.
ProgressFn = Callable[[int, int], None]


@dataclass(frozen=True)
class Hits:
    """Per query (same order as the queries given), the corpus positions found, best first, and their scores."""

    indices: list[np.ndarray]  # int64 positions into the corpus sequence
    scores: list[np.ndarray]  # float64, same lengths, non-increasing

    def __post_init__(self) -> None:
        if len(self.indices) != len(self.scores):
            raise ValueError(f"{len(self.indices)} index lists but {len(self.scores)} score lists")


def no_hits(n_queries: int) -> Hits:
    """Nothing found for any of `n_queries` queries (an empty corpus, say)."""
    return Hits(indices=[np.zeros(0, np.int64) for _ in range(n_queries)],
                scores=[np.zeros(0, np.float64) for _ in range(n_queries)])


def keep_best(found: np.ndarray, scores: np.ndarray, keep: int) -> tuple[np.ndarray, np.ndarray]:
    """A re-ranking stage's cut: `found` (a ranking, best first) re-ordered by `scores` (its new scores, same
    order), the `keep` best kept; equal scores stay in `found`'s order, so the earlier stage breaks the ties."""
    scores = np.asarray(scores, np.float64)
    order = np.argsort(-scores, kind="stable")[:keep]  # stable on the negated scores: ties keep found's order
    return np.asarray(found, np.int64)[order], scores[order]


def check_depth(depth: int) -> None:
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")


def top_positions(scores: np.ndarray, depth: int) -> np.ndarray:
    """Positions of the `depth` highest of `scores`, best first; equal scores in position order, so that a
    run is the same however often it is repeated (a plain argpartition leaves ties in arbitrary order, and
    which of several tied passages make the cut at `depth` arbitrary too)."""
    if len(scores) > depth:
        # The depth-th largest value: everything above it is in, and the tied ones at it by position.
        cut = np.partition(scores, len(scores) - depth)[len(scores) - depth]
        above = np.flatnonzero(scores > cut)
        at = np.flatnonzero(scores == cut)[: depth - len(above)]
        chosen = np.concatenate([above, at])
    else:
        chosen = np.arange(len(scores))
    return chosen[np.lexsort((chosen, -scores[chosen]))].astype(np.int64)
