"""Ranking quality of P within each query: nDCG and average precision through rank_eval, their expected
values over the orders of pairs with tied P, and Kendall's tau-b of P against the gold grade."""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba.typed import List as TypedList
from rank_eval import evaluate

from models_llm.metrics.classification import ratio
from models_llm.metrics.judge_data import QueryLayout

# rank_eval stores qrels as int64 (Qrels.add_score does int(score)), so a gain of 0.5 would silently become
# 0, as in DIRAS's own script. nDCG does not change when every gain is multiplied by one constant (DCG and
# ideal DCG both scale), so gains go in as round(gain / max gain * GAIN_SCALE): exact for gains that are
# multiples of 1e-6 of the largest, otherwise off by under 5e-7 of it.
GAIN_SCALE = 10**6


@dataclass(frozen=True)
class QueryRanking:
    """Per-query values, indexed by query number; nan where the metric is undefined for that query."""

    ndcg: np.ndarray
    ndcg_at_10: np.ndarray
    ap: np.ndarray
    ap_at_10: np.ndarray
    ndcg_tie_aware: np.ndarray
    ap_tie_aware: np.ndarray
    kendall_tau: np.ndarray


@numba.njit(cache=True)
def _rank_eval_order(p, starts):
    # What rank_eval's Run does with one query's scores in insertion (pool) order: numba's np.argsort,
    # reversed. That quicksort is not stable, so for tied P this is the only way to get rank_eval's order.
    out = np.empty(p.size, np.int64)
    for q in range(starts.size - 1):
        s, e = starts[q], starts[q + 1]
        out[s:e] = s + np.argsort(p[s:e])[::-1]
    return out


def _by_query(rows: np.ndarray, starts: np.ndarray):
    return TypedList(np.split(np.ascontiguousarray(rows), starts[1:-1]))


def _evaluate(qrels: np.ndarray, run: np.ndarray, starts: np.ndarray, metrics: list[str]) -> dict[str, np.ndarray]:
    # Lists of per-query (doc id, score) arrays are what Qrels/Run turn into before scoring (qrels sorted by
    # score, the run ranked); building them directly skips 20+ s of typed-dict construction at 1M pairs.
    return evaluate(
        _by_query(qrels, starts), _by_query(run, starts), metrics,
        return_mean=False, threads=numba.config.NUMBA_NUM_THREADS,
    )


def _descending_within_query(values: np.ndarray, query_of: np.ndarray) -> np.ndarray:
    return np.lexsort((-values, query_of))


def _rank_eval_scores(layout: QueryLayout, p, gains, relevant) -> dict[str, np.ndarray]:
    starts, query_of = layout.starts, np.repeat(np.arange(layout.n_queries), layout.sizes)
    doc = layout.position().astype(float)
    ranked = _rank_eval_order(p, starts)
    run = np.column_stack((doc[ranked], p[ranked]))
    out = {}
    if gains.max() > 0:
        scaled = np.rint(gains / gains.max() * GAIN_SCALE)
        by_gain = _descending_within_query(scaled, query_of)
        out.update(_evaluate(np.column_stack((doc[by_gain], scaled[by_gain])), run, starts, ["ndcg", "ndcg@10"]))
    if relevant.any():
        binary = relevant.astype(float)
        by_rel = _descending_within_query(binary, query_of)
        out.update(_evaluate(np.column_stack((doc[by_rel], binary[by_rel])), run, starts, ["map", "map@10"]))
    return out


def _tie_aware(layout: QueryLayout, p, gains, relevant) -> tuple[np.ndarray, np.ndarray]:
    """Per-query expected nDCG and AP when pairs with equal P are ordered at random.

    nDCG (McSherry & Najork 2008): every rank of a tied group gets the group's mean gain. AP: a relevant
    pair of a group of n pairs, r of them relevant, after c pairs of which c_rel are relevant, sits at
    within-group position k uniformly, with (k-1)(r-1)/(n-1) other relevant pairs expected before it, so its
    expected precision is (1/n) sum_k (c_rel + 1 + (k-1)(r-1)/(n-1)) / (c + k); with harmonic numbers
    S0 = H(c+n) - H(c) = sum_k 1/(c+k) and S1 = sum_k (k-1)/(c+k) = n - (c+1) S0 the group adds
    (r/n) ((c_rel + 1) S0 + (r-1)/(n-1) S1) to the sum of precisions.
    """
    nq, starts = layout.n_queries, layout.starts
    query_of = np.repeat(np.arange(nq), layout.sizes)
    by_p = _descending_within_query(p, query_of)
    ps, qs, gs, rs = p[by_p], query_of[by_p], gains[by_p], relevant[by_p].astype(float)
    first = np.ones(ps.size, bool)
    first[1:] = (ps[1:] != ps[:-1]) | (qs[1:] != qs[:-1])
    group_start = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    n = np.diff(np.append(group_start, ps.size)).astype(float)
    gq = qs[group_start]
    before = (group_start - starts[gq]).astype(np.int64)
    after = before + n.astype(np.int64)

    longest = int(layout.sizes.max())
    ranks = np.arange(1, longest + 1)
    discount = np.concatenate(([0.0], np.cumsum(1.0 / np.log2(ranks + 1))))
    harmonic = np.concatenate(([0.0], np.cumsum(1.0 / ranks)))

    group_gain = np.bincount(group, weights=gs)
    dcg = np.bincount(gq, weights=group_gain / n * (discount[after] - discount[before]), minlength=nq)
    ideal_gains = gains[_descending_within_query(gains, query_of)]
    ideal = np.bincount(query_of, weights=ideal_gains / np.log2(layout.position() + 2), minlength=nq)

    r = np.bincount(group, weights=rs)
    relevant_so_far = np.concatenate(([0.0], np.cumsum(rs)))
    c_rel = relevant_so_far[group_start] - relevant_so_far[starts[gq]]
    s0 = harmonic[after] - harmonic[before]
    s1 = n - (before + 1) * s0
    spread = np.divide(r - 1, n - 1, out=np.zeros_like(n), where=n > 1)
    precision_sum = np.bincount(gq, weights=r / n * ((c_rel + 1) * s0 + spread * s1), minlength=nq)
    n_relevant = np.bincount(query_of, weights=relevant.astype(float), minlength=nq)
    return ratio(dcg, ideal), ratio(precision_sum, n_relevant)


def _pairs(count: np.ndarray) -> np.ndarray:
    return count * (count - 1) / 2


def _kendall(layout: QueryLayout, p, grade) -> np.ndarray:
    """Kendall's tau-b of P against the gold grade in each query, as scipy's kendalltau (variant b) gives it:
    (concordant - discordant) / sqrt((pairs - pairs tied in P) (pairs - pairs tied in grade)).

    Without a loop over pairs or queries: the grade takes few values, so for each grade a, every pair with a
    higher grade adds (pairs of grade a with smaller P) - (pairs of grade a with larger P), read off running
    counts over the pairs sorted by P within their query. Counts are whole numbers, exact in float64.
    """
    nq, starts = layout.n_queries, layout.starts
    query_of = np.repeat(np.arange(nq), layout.sizes)
    by_p = np.lexsort((p, query_of))
    x, y = p[by_p], grade[by_p]
    first = np.ones(x.size, bool)
    first[1:] = (x[1:] != x[:-1]) | (query_of[1:] != query_of[:-1])
    tie_start = np.flatnonzero(first)
    tie_end = np.append(tie_start[1:], x.size)
    tie_of = np.cumsum(first) - 1
    before, after = tie_start[tie_of], tie_end[tie_of]
    query_start, query_end = starts[query_of], starts[query_of + 1]

    levels, level = np.unique(y, return_inverse=True)
    signed = np.zeros(x.size)
    for a in range(levels.size):
        running = np.concatenate(([0.0], np.cumsum(level == a)))
        smaller = running[before] - running[query_start]
        larger = running[query_end] - running[after]
        signed += np.where(level > a, smaller - larger, 0.0)
    s = np.bincount(query_of, weights=signed, minlength=nq)

    total = _pairs(layout.sizes.astype(float))
    tied_p = np.bincount(query_of[tie_start], weights=_pairs((tie_end - tie_start).astype(float)), minlength=nq)
    per_grade = np.bincount(query_of * levels.size + level, minlength=nq * levels.size).reshape(nq, -1)
    tied_grade = _pairs(per_grade.astype(float)).sum(axis=1)
    return ratio(s, np.sqrt((total - tied_p) * (total - tied_grade)))


def query_ranking(layout: QueryLayout, p: np.ndarray, grade: np.ndarray, gains: np.ndarray,
                  relevant: np.ndarray) -> QueryRanking:
    """Per-query ranking metrics of P (pairs in input order; a query's pairs are taken in pool order).
    nDCG is undefined for a query with no pair of positive gain, AP for one with no relevant pair, tau-b
    for one whose P or gold grade is constant. rank_eval would score the first two 0; they are left out
    of the mean instead, since no ranking of such a query is better or worse than another."""
    nq = layout.n_queries
    p, grade, gains, relevant = (a[layout.order] for a in (p, grade, gains, relevant))
    query_of = np.repeat(np.arange(nq), layout.sizes)
    has_gain = np.bincount(query_of, weights=(gains > 0).astype(float), minlength=nq) > 0
    has_relevant = np.bincount(query_of, weights=relevant.astype(float), minlength=nq) > 0
    scores = _rank_eval_scores(layout, p, gains, relevant)
    ndcg_tie, ap_tie = _tie_aware(layout, p, gains, relevant)
    undefined = np.full(nq, np.nan)

    def masked(values, defined):
        return np.where(defined, values, np.nan)

    return QueryRanking(
        ndcg=masked(scores.get("ndcg", undefined), has_gain),
        ndcg_at_10=masked(scores.get("ndcg@10", undefined), has_gain),
        ap=masked(scores.get("map", undefined), has_relevant),
        ap_at_10=masked(scores.get("map@10", undefined), has_relevant),
        ndcg_tie_aware=masked(ndcg_tie, has_gain),
        ap_tie_aware=masked(ap_tie, has_relevant),
        kendall_tau=_kendall(layout, p, grade),
    )


def mean_defined(values: np.ndarray) -> float | None:
    """Mean over the queries where the metric is defined; None when it is defined for none."""
    defined = values[np.isfinite(values)]
    return float(defined.mean()) if defined.size else None
