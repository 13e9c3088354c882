"""Ranking quality of P within each query (or evaluation unit): nDCG and average precision, whole and cut at
each cut-off, through pytrec_eval (trec_eval's measures) on pairs in rank_eval's tie order, their expected
values over the orders of pairs with tied P, and Kendall's tau-b of P against the gold grade."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numba
import numpy as np
import pytrec_eval

from models_llm.metrics.classification import ratio
from models_llm.metrics.judge_data import QueryLayout

# trec_eval takes relevance as a whole number and uses it as the gain, and its cost grows with the largest one
# (per query it keeps an entry for every whole number up to it and searches them for each ranked pair: on 200k
# pairs 0.3 s at a largest value of 100, 0.7 s at 1,000, 12 s at 10,000). nDCG does not change when every gain
# is multiplied by one constant (DCG and ideal DCG both scale), so gains go in as gain / max gain * m with the
# smallest m that makes them all whole, each ratio read as the nearest fraction with a denominator up to
# GAIN_SCALE: exact for the usual scales (0, 0.5, 1 as 0, 1, 2; thirds as 0, 1, 2, 3). A scale that would need
# m above MAX_GAIN_LEVEL is rounded at MAX_GAIN_LEVEL instead, each gain off by under 1/2000 of the largest.
GAIN_SCALE = 10**6
MAX_GAIN_LEVEL = 1000

# The cut-offs of nDCG@k and MAP@k unless others are asked for (DIRAS reports @5, @10 and @15). map_cut_k
# divides by all of the query's relevant pairs, not by min(relevant, k): the same definition as rank_eval's
# map@k.
DEFAULT_CUTOFFS = (10,)
MAX_CUTOFF = 1000


def cutoffs_check(cutoffs: tuple[int, ...]) -> tuple[int, ...]:
    """The cut-offs sorted and without repeats; ValueError unless each is a whole number from 1 to MAX_CUTOFF."""
    if not cutoffs:
        raise ValueError("give at least one cut-off")
    bad = [k for k in cutoffs if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_CUTOFF]
    if bad:
        raise ValueError(f"cut-offs must be whole numbers from 1 to {MAX_CUTOFF}, got {bad}")
    return tuple(sorted(set(cutoffs)))


@dataclass(frozen=True)
class QueryRanking:
    """Per-query values, indexed by query number; nan where the metric is undefined for that query.
    `ndcg_at[k]` and `ap_at[k]`: nDCG and AP of the first k ranks, for each cut-off k."""

    ndcg: np.ndarray
    ndcg_at: dict[int, np.ndarray]
    ap: np.ndarray
    ap_at: dict[int, np.ndarray]
    ndcg_tie_aware: np.ndarray
    ap_tie_aware: np.ndarray
    kendall_tau: np.ndarray


@numba.njit(cache=True)
def _rank_eval_order(p, starts):
    # The order DIRAS's script got from rank_eval, whose Run ranks one query's scores, given in insertion
    # (pool) order, by numba's np.argsort reversed. That quicksort is not stable, so for tied P running
    # the same sort is the only way to keep the documented order (numba stays a dependency for it).
    out = np.empty(p.size, np.int64)
    for q in range(starts.size - 1):
        s, e = starts[q], starts[q + 1]
        out[s:e] = s + np.argsort(p[s:e])[::-1]
    return out


def _descending_within_query(values: np.ndarray, query_of: np.ndarray) -> np.ndarray:
    return np.lexsort((-values, query_of))


def _qrels(layout: QueryLayout, rank_name: list[str], values: np.ndarray) -> dict[str, dict[str, int]]:
    # Positive values only: trec_eval gives a pair the qrels leave out gain 0 and counts it not relevant, so
    # zeros would only cost time; a query with none is left out.
    kept = values > 0
    counts = np.bincount(np.repeat(np.arange(layout.n_queries), layout.sizes)[kept], minlength=layout.n_queries)
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    names = [rank_name[r] for r in layout.position()[kept].tolist()]
    grades = values[kept].astype(np.int64).tolist()
    return {str(q): dict(zip(names[bounds[q]:bounds[q + 1]], grades[bounds[q]:bounds[q + 1]]))
            for q in np.flatnonzero(counts).tolist()}


def _evaluate(layout: QueryLayout, qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]],
              measures: dict[str, str]) -> dict[str, np.ndarray]:
    # A query the qrels leave out scores 0, as trec_eval and rank_eval score one without a positive value; so
    # does one the run retrieves nothing for (trec_eval -c).
    out = {field: np.zeros(layout.n_queries) for field in measures.values()}
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(measures))
    for q, values in evaluator.evaluate({q: run[q] for q in qrels if run[q]}).items():
        for measure, field in measures.items():
            out[field][int(q)] = values[measure]
    return out


def _measures(cutoffs: tuple[int, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """trec_eval's measures and the fields they fill: graded (nDCG) and binary (AP)."""
    graded = {"ndcg": "ndcg"} | {f"ndcg_cut_{k}": f"ndcg@{k}" for k in cutoffs}
    binary = {"map": "ap"} | {f"map_cut_{k}": f"ap@{k}" for k in cutoffs}
    return graded, binary


def _ranked(layout: QueryLayout, p: np.ndarray, retrieved: np.ndarray) -> np.ndarray:
    """Each query's retrieved pairs in rank_eval's order of a run holding only them, then the pairs it did not
    retrieve in pool order (indices into the grouped arrays)."""
    query_of = np.repeat(np.arange(layout.n_queries), layout.sizes)
    taken = np.flatnonzero(retrieved)
    taken_starts = np.concatenate(([0], np.cumsum(np.bincount(query_of[taken], minlength=layout.n_queries))))
    first = taken[_rank_eval_order(p[taken], taken_starts)]
    rest = np.flatnonzero(~retrieved)
    both = np.concatenate((first, rest))
    behind = np.concatenate((np.zeros(first.size, np.int64), np.ones(rest.size, np.int64)))
    return both[np.lexsort((behind, query_of[both]))]


def _gain_levels(gains: np.ndarray) -> np.ndarray:
    ratios = (np.unique(gains) / gains.max()).tolist()
    m = math.lcm(*(Fraction(r).limit_denominator(GAIN_SCALE).denominator for r in ratios))
    return np.rint(gains / gains.max() * min(m, MAX_GAIN_LEVEL)).astype(np.int64)


def _trec_eval_scores(layout: QueryLayout, p, gains, relevant, retrieved, cutoffs) -> dict[str, np.ndarray]:
    # Each pair is named by its rank in rank_eval's order and the run scores rank r of a query of n retrieved
    # pairs n - r: no ties are left for trec_eval to break (it would by pair name), and the queries with as
    # many retrieved pairs share one run dict, so the str-keyed dicts pytrec_eval takes cost little even at 1M
    # pairs. Pairs not retrieved stay in the qrels only, as trec_eval counts a relevant document the run lacks.
    sizes = layout.sizes.tolist()
    taken = np.bincount(np.repeat(np.arange(layout.n_queries), layout.sizes)[retrieved],
                        minlength=layout.n_queries).tolist()
    ranked = _ranked(layout, p, retrieved)
    rank_name = [str(r) for r in range(max(sizes))]
    by_size = {n: dict(zip(rank_name[:n], np.arange(n, 0, -1, dtype=float).tolist())) for n in set(taken)}
    run = {str(q): by_size[n] for q, n in enumerate(taken)}
    levels = _gain_levels(gains[ranked]) if gains.max() > 0 else np.zeros(p.size, np.int64)
    graded, binary = _measures(cutoffs)
    return (_evaluate(layout, _qrels(layout, rank_name, levels), run, graded)
            | _evaluate(layout, _qrels(layout, rank_name, relevant[ranked].astype(np.int64)), run, binary))


def _tie_aware(layout: QueryLayout, p, gains, relevant, retrieved) -> tuple[np.ndarray, np.ndarray]:
    """Per-query expected nDCG and AP when pairs with equal P are ordered at random; pairs not retrieved come
    after every retrieved one and add nothing, as in trec_eval, but count in the ideal DCG and the relevant.

    nDCG (McSherry & Najork 2008): every rank of a tied group gets the group's mean gain. AP: a relevant
    pair of a group of n pairs, r of them relevant, after c pairs of which c_rel are relevant, sits at
    within-group position k uniformly, with (k-1)(r-1)/(n-1) other relevant pairs expected before it, so its
    expected precision is (1/n) sum_k (c_rel + 1 + (k-1)(r-1)/(n-1)) / (c + k); with harmonic numbers
    S0 = H(c+n) - H(c) = sum_k 1/(c+k) and S1 = sum_k (k-1)/(c+k) = n - (c+1) S0 the group adds
    (r/n) ((c_rel + 1) S0 + (r-1)/(n-1) S1) to the sum of precisions.
    """
    nq, starts = layout.n_queries, layout.starts
    query_of = np.repeat(np.arange(nq), layout.sizes)
    by_p = _descending_within_query(np.where(retrieved, p, -1.0), query_of)  # P >= 0: not retrieved go last
    ps, qs, gs, rs = np.where(retrieved, p, -1.0)[by_p], query_of[by_p], gains[by_p], relevant[by_p].astype(float)
    counted = retrieved[by_p]
    first = np.ones(ps.size, bool)
    first[1:] = (ps[1:] != ps[:-1]) | (qs[1:] != qs[:-1])
    group_start = np.flatnonzero(first)
    group = np.cumsum(first) - 1
    n = np.diff(np.append(group_start, ps.size)).astype(float)
    gq = qs[group_start]
    before = (group_start - starts[gq]).astype(np.int64)
    after = before + n.astype(np.int64)

    harmonic = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, int(layout.sizes.max()) + 1))))

    # Rank by rank, gain / log2(rank + 1), as trec_eval sums DCG: differences of a running sum of discounts
    # lose digits deep in a long query, and without ties this now agrees with trec_eval's nDCG to rounding.
    log_rank = np.log2(layout.position() + 2)
    mean_gain = np.bincount(group, weights=gs) / n
    dcg = np.bincount(qs, weights=np.where(counted, mean_gain[group] / log_rank, 0.0), minlength=nq)
    ideal = np.bincount(query_of, weights=gains[_descending_within_query(gains, query_of)] / log_rank, minlength=nq)

    r = np.bincount(group, weights=rs)
    relevant_so_far = np.concatenate(([0.0], np.cumsum(rs)))
    c_rel = relevant_so_far[group_start] - relevant_so_far[starts[gq]]
    s0 = harmonic[after] - harmonic[before]
    s1 = n - (before + 1) * s0
    spread = np.divide(r - 1, n - 1, out=np.zeros_like(n), where=n > 1)
    added = np.where(counted[group_start], r / n * ((c_rel + 1) * s0 + spread * s1), 0.0)
    precision_sum = np.bincount(gq, weights=added, minlength=nq)
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
                  relevant: np.ndarray, *, cutoffs: tuple[int, ...] = DEFAULT_CUTOFFS,
                  retrieved: np.ndarray | None = None) -> QueryRanking:
    """Per-query ranking metrics of P (pairs in input order; a query's pairs are taken in pool order), nDCG
    and AP also cut at each of `cutoffs`. `retrieved` (default: all) marks the pairs the judge's run holds;
    the others are in the qrels only, as trec_eval treats a judged document the run lacks.
    nDCG is undefined for a query with no pair of positive gain, AP for one with no relevant pair, tau-b
    for one whose P or gold grade is constant. trec_eval (as rank_eval) would score the first two 0; they
    are left out of the mean instead, since no ranking of such a query is better or worse than another."""
    nq = layout.n_queries
    cutoffs = cutoffs_check(cutoffs)
    retrieved = np.ones(p.size, bool) if retrieved is None else np.asarray(retrieved, bool)
    p, grade, gains, relevant, retrieved = (a[layout.order] for a in (p, grade, gains, relevant, retrieved))
    query_of = np.repeat(np.arange(nq), layout.sizes)
    has_gain = np.bincount(query_of, weights=(gains > 0).astype(float), minlength=nq) > 0
    has_relevant = np.bincount(query_of, weights=relevant.astype(float), minlength=nq) > 0
    scores = _trec_eval_scores(layout, p, gains, relevant, retrieved, cutoffs)
    ndcg_tie, ap_tie = _tie_aware(layout, p, gains, relevant, retrieved)

    def masked(values, defined):
        return np.where(defined, values, np.nan)

    return QueryRanking(
        ndcg=masked(scores["ndcg"], has_gain),
        ndcg_at={k: masked(scores[f"ndcg@{k}"], has_gain) for k in cutoffs},
        ap=masked(scores["ap"], has_relevant),
        ap_at={k: masked(scores[f"ap@{k}"], has_relevant) for k in cutoffs},
        ndcg_tie_aware=masked(ndcg_tie, has_gain),
        ap_tie_aware=masked(ap_tie, has_relevant),
        kendall_tau=_kendall(layout, p, grade),
    )


def mean_defined(values: np.ndarray) -> float | None:
    """Mean over the queries where the metric is defined; None when it is defined for none."""
    defined = values[np.isfinite(values)]
    return float(defined.mean()) if defined.size else None
