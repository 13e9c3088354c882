"""The systems question of a replay (#50): would the qrels the loop exports at this point rank the runs as the truth
does? Each run's nDCG@10 (binary: a pair is relevant or not, as the replay's qrels say; trec_eval's nDCG@10 on 0/1
grades, tested against pytrec_eval) is averaged over the pool's queries, under the exported qrels and under the
truth, and the two rankings of the runs are compared by Kendall's tau-b and tau-AP (models_llm.systems.agreement,
Yilmaz et al. 2008). Every pool pair is judged under both qrels; a run's passage outside the pool is not relevant.

Vectorised over the pool: a run is its discount at each pool pair (1 / log2(rank + 1) within its top 10, else 0), so
one state's scores of every run are a product of two small matrices."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from models_llm.systems.agreement import tau_ap

SYSTEMS_DEPTH = 10
SYSTEMS_MEASURE = "nDCG@10"
_IDEAL = np.concatenate(([0.0], np.cumsum(1.0 / np.log2(np.arange(2, SYSTEMS_DEPTH + 2)))))


class ReplayRunsError(ValueError):
    """Runs a replay cannot compare (the message says why)."""


@dataclass(frozen=True, eq=False)
class ReplayRuns:
    """The runs compared, over the pool: `rank[r, i]`, the 1-based rank of pool pair i in run r for the pair's query
    (0: not in its top SYSTEMS_DEPTH); `query[i]`, the pair's query index."""

    names: list[str]
    rank: np.ndarray
    query: np.ndarray

    def __post_init__(self) -> None:
        if self.rank.ndim != 2 or self.rank.shape != (len(self.names), self.query.size):
            raise ReplayRunsError("one rank per run and pool pair")
        if len(self.names) < 2:
            raise ReplayRunsError("comparing rankings of runs needs at least two runs")

    def discounts(self) -> np.ndarray:
        inside = (self.rank >= 1) & (self.rank <= SYSTEMS_DEPTH)
        return np.where(inside, 1.0 / np.log2(np.maximum(self.rank, 1) + 1.0), 0.0)


@dataclass(frozen=True)
class SystemsAgreement:
    """Kendall's tau-b and tau-AP of the runs' ranking under the exported qrels against the truth's (None where
    undefined: every run tied under one of them)."""

    kendall_tau: float | None
    tau_ap: float | None


class RunScorer:
    """Each run's mean nDCG@10 over the queries, for any 0/1 relevance of the pool pairs."""

    def __init__(self, runs: ReplayRuns) -> None:
        self.runs = runs
        queries = int(runs.query.max()) + 1 if runs.query.size else 0
        self._onehot = np.zeros((runs.query.size, queries))
        self._onehot[np.arange(runs.query.size), runs.query] = 1.0
        self._discounts = runs.discounts()

    def scores(self, relevant: np.ndarray) -> np.ndarray:
        rel = relevant.astype(float)
        dcg = (self._discounts * rel[None, :]) @ self._onehot  # (runs, queries)
        ideal = _IDEAL[np.minimum(rel @ self._onehot, SYSTEMS_DEPTH).astype(np.int64)]
        ndcg = np.divide(dcg, ideal[None, :], out=np.zeros_like(dcg), where=ideal[None, :] > 0)
        return ndcg.mean(axis=1) if ndcg.shape[1] else np.zeros(len(self.runs.names))


def systems_agreement(truth_scores: np.ndarray, exported_scores: np.ndarray) -> SystemsAgreement:
    """tau-b (scipy) and tau-AP (the truth as the reference ranking) of two scorings of the same runs."""
    if np.ptp(truth_scores) == 0 or np.ptp(exported_scores) == 0:
        return SystemsAgreement(None, None)
    tau = stats.kendalltau(truth_scores, exported_scores).statistic
    return SystemsAgreement(float(tau), float(tau_ap(truth_scores, exported_scores)))


def runs_from_rankings(names: Sequence[str], rankings: Sequence[dict[tuple[int, int], int]],
                       pool_keys: Sequence[tuple[int, int]], query: np.ndarray) -> ReplayRuns:
    """ReplayRuns from each run's {(query, passage): rank} (1-based) and the pool's (query, passage) per pair."""
    rank = np.zeros((len(names), len(pool_keys)), dtype=np.int64)
    for r, ranking in enumerate(rankings):
        rank[r] = [ranking.get(key, 0) for key in pool_keys]
    return ReplayRuns(list(names), rank, np.asarray(query, dtype=np.int64))
