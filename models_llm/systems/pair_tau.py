"""DIRAS Table 5: how far a retriever's scores agree with a judge's P, pair by pair. Per query, Kendall's tau-b
between the retriever's scores and the judge's P over the pairs both give a number to; then the mean over the
queries (the released code's `table5()`: `kendalltau(student_scores, labels, variant='b')` per group, then
`np.mean`). A query with fewer than two such pairs, or whose scores or P are all tied, has no tau: it is
counted and left out of the mean, where the released code's np.mean would turn the whole mean into nan."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class QueryTau:
    """One query: the pairs both sides scored, and their tau-b (None: fewer than two pairs, or one side all
    tied)."""

    query: str
    pairs: int
    tau: float | None


@dataclass(frozen=True)
class PairTau:
    """Per-query tau-b and their mean over the queries that have one (None: no query has one)."""

    queries: tuple[QueryTau, ...]
    mean: float | None

    @property
    def undefined(self) -> int:
        return sum(query.tau is None for query in self.queries)

    @property
    def defined(self) -> int:
        return len(self.queries) - self.undefined

    @property
    def pairs(self) -> int:
        return sum(query.pairs for query in self.queries)


def _tau_b(x: np.ndarray, y: np.ndarray) -> float | None:
    if x.size < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return None
    tau = stats.kendalltau(x, y, variant="b").statistic
    return None if np.isnan(tau) else float(tau)


def pair_kendall_tau(scores: Mapping[str, Mapping[str, float]],
                     p: Mapping[str, Mapping[str, float]]) -> PairTau:
    """Kendall's tau-b, per query, between `scores` (query -> doc -> retrieval score) and `p` (query -> doc ->
    the judge's P) over the docs both hold, in query order of `scores`; and the mean over the queries that have
    one. Queries the judge scored none of are listed with 0 pairs."""
    rows = []
    for query, by_doc in scores.items():
        judged = p.get(query, {})
        docs = [doc for doc in by_doc if doc in judged]
        x = np.fromiter((by_doc[doc] for doc in docs), dtype=float, count=len(docs))
        y = np.fromiter((judged[doc] for doc in docs), dtype=float, count=len(docs))
        rows.append(QueryTau(query=query, pairs=len(docs), tau=_tau_b(x, y)))
    defined = [row.tau for row in rows if row.tau is not None]
    return PairTau(queries=tuple(rows), mean=float(np.mean(defined)) if defined else None)
