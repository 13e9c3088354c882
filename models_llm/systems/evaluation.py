"""System evaluation of runs: trec_eval's measures per query (through pytrec_eval) with percentile bootstrap
intervals over queries, and the expected measures when every judged document is relevant with its judge's
calibrated probability P.

Expected measures (ExpectedEvaluator). Document d of query q is relevant with probability P(q, d), independently
of the others; a document without P (unjudged) is not relevant.
- nDCG@k: trec_eval's nDCG@k with gain P. Its numerator is the exact expected DCG@k; its denominator is the ideal
  DCG of the expected gains, not the expected ideal DCG, so it estimates the binary nDCG@k by plug-in rather than
  being its expectation.
- P@10: mean P of the top 10, the exact expectation of the binary P@10.
- R@100: sum of P in the top 100 over the sum of P of the query's judged documents, a ratio of expectations.
AP is left out: trec_eval's AP is binary only, and it divides by the labels' own count of relevant documents,
so a plug-in of P would be neither trec_eval's measure nor its expectation.
Interval: every bootstrap draw resamples the queries with replacement AND draws each judged document's label
~ Bernoulli(P) (one label per document and draw, so a query picked twice keeps its labels), computes the binary
measures on those labels (numpy; trec_eval's definitions, tested against pytrec_eval) and averages them over
the resampled queries; the interval is the percentile interval of these draws. It says where the measure under
the true labels lies for the population of queries, counting both the sampling of queries and the labels' own
uncertainty, as far as P is calibrated and the labels independent. For nDCG and R@100 the point estimate (a
plug-in) need not sit at the centre of the draws (the mean of a ratio).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count

import numpy as np
import pytrec_eval

from models_llm.metrics.bootstrap import percentile_interval, resampling_counts

MEASURES = ("nDCG@10", "nDCG@100", "AP", "P@10", "R@100", "judged@10")
# Measures for incomplete judgments, computed when asked (they read whole rankings): trec_eval's bpref and infAP
# (a pool pair without a grade is "pooled but unjudged", -1 in trec_eval's qrels), and the condensed-list
# variants of Sakai (2007), nDCG'@10 and AP': the measure on the ranking with its unjudged documents removed.
INCOMPLETE_MEASURES = ("bpref", "infAP", "nDCG'@10", "AP'")
# Measures of qrels made from a sample with known inclusion probabilities (models_llm.systems.sampled): defined
# only for such a source.
SAMPLE_MEASURES = ("statAP", "infNDCG@10")
ALL_MEASURES = MEASURES + INCOMPLETE_MEASURES + SAMPLE_MEASURES
EXPECTED_MEASURES = ("nDCG@10", "nDCG@100", "P@10", "R@100")
# How deep into each ranking a measure reads (None: all of it, as AP does).
MEASURE_DEPTHS: dict[str, int | None] = {"nDCG@10": 10, "nDCG@100": 100, "AP": None, "P@10": 10, "R@100": 100,
                                         "judged@10": 10, "bpref": None, "infAP": None, "nDCG'@10": None,
                                         "AP'": None, "statAP": None, "infNDCG@10": 10}
# Each measure in one plain line, with the way that is better.
MEASURE_EXPLAIN = {
    "nDCG@10": "the grades of the top 10, the top weighing most, against the best possible order; higher is better",
    "nDCG@100": "the same over the top 100; higher is better",
    "AP": "average precision over the whole ranking: relevant passages near the top; higher is better",
    "P@10": "share of the top 10 that is relevant; higher is better",
    "R@100": "share of the query's relevant passages found in the top 100; higher is better",
    "judged@10": "share of the top 10 the source graded; below 1 the other numbers are lower bounds",
    "bpref": "how often judged relevant passages rank above judged non-relevant ones; unjudged passages are "
             "ignored, not counted as non-relevant (assumes the judged ones are a fair sample); higher is better",
    "infAP": "AP inferred from incomplete judgments: unjudged passages of the pool are taken to be relevant as "
             "often as the judged ones above them (assumes the judged pool pairs are a random sample of the pool); "
             "higher is better",
    "nDCG'@10": "nDCG@10 on the ranking with its unjudged passages removed (condensed list): judges the run on "
                "what was judged only, so unjudged passages neither help nor hurt; higher is better",
    "AP'": "AP on the condensed list (unjudged passages removed); higher is better",
    "statAP": "AP estimated from a random sample of the pool, each judged passage standing for 1/(its chance of "
              "being drawn) passages (Horvitz-Thompson); only a sampled source has it; higher is better",
    "infNDCG@10": "nDCG@10 estimated from a random sample of the pool: an unjudged pool passage gets the mean grade "
                  "of the sampled ones of its stratum, the ideal from the estimated count of each grade; only a "
                  "sampled source has it; higher is better",
}

# The measures left to pytrec_eval, by trec_eval name. None looks below rank 100, so the run it gets stops there:
# converting a 1,000-deep run is most of pytrec_eval's time. AP, which reads the whole list, is computed here.
_TREC_NAMES = {"nDCG@10": "ndcg_cut_10", "nDCG@100": "ndcg_cut_100", "P@10": "P_10", "R@100": "recall_100"}
_DEPTH = 100
_TOP = 10
# Distinct scores in the given order, so that trec_eval's own tie-break (by document id) never reorders a run.
_SCORES = [float(_DEPTH - i) for i in range(_DEPTH)]
# Ideal DCG of r relevant documents (binary gains) is _IDEAL_DCG[min(r, k)].
_IDEAL_DCG = np.concatenate(([0.0], np.cumsum(1.0 / np.log2(np.arange(2, _DEPTH + 2)))))
# Label draws go in blocks of at most this many (draw, query, judged document) cells, to bound memory.
_LABEL_CELLS = 2_000_000


def trec_order(doc_ids: Sequence[str], scores: Sequence[float]) -> list[str]:
    """`doc_ids` in the order trec_eval ranks them by `scores`: score descending, then document id descending
    (trec_eval's strcmp on the UTF-8 bytes, which orders as Python compares the strings). For imported runs, whose
    file gives scores, not ranks."""
    return [doc for doc, _ in sorted(zip(doc_ids, scores), key=lambda pair: (pair[1], pair[0]), reverse=True)]


@dataclass(frozen=True, eq=False)  # eq=False: arrays do not compare to one truth value
class QueryScores:
    """Per-query values of each measure, aligned with `queries` (the evaluated query ids, sorted)."""

    queries: tuple[str, ...]
    values: dict[str, np.ndarray]

    def mean(self, measure: str) -> float | None:
        """Mean over the queries; None without queries."""
        values = self.values[measure]
        return float(values.mean()) if values.size else None

    def interval(self, measure: str, *, draws: int = 1000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float] | None:
        """Percentile bootstrap interval of the mean; None without queries or draws."""
        return percentile_interval(self._draw_means((measure,), draws, seed)[measure], level)

    def intervals(self, *, draws: int = 1000, seed: int = 0, level: float = 0.95) -> dict[str, tuple[float, float] | None]:
        """interval() of every measure from the same draws, in one pass."""
        means = self._draw_means(tuple(self.values), draws, seed)
        return {measure: percentile_interval(means[measure], level) for measure in self.values}

    def subset(self, queries: Iterable[str]) -> QueryScores:
        """The scores of those of `queries` that were evaluated (a metadata group); others are ignored."""
        row = {query: i for i, query in enumerate(self.queries)}
        return self._take(np.array(sorted({row[q] for q in queries if q in row}), dtype=np.int64))

    def _take(self, rows: np.ndarray) -> QueryScores:
        return QueryScores(tuple(self.queries[i] for i in rows), {m: v[rows] for m, v in self.values.items()})

    def _draw_means(self, measures: tuple[str, ...], draws: int, seed: int) -> dict[str, np.ndarray]:
        n = len(self.queries)
        if n == 0 or draws < 1:
            return {measure: np.zeros(0) for measure in measures}
        stacked = np.column_stack([self.values[measure] for measure in measures])
        means = np.concatenate([counts @ stacked / n for counts in resampling_counts(n, draws, seed)])
        return {measure: means[:, j] for j, measure in enumerate(measures)}


def _tops(run: Mapping[str, Sequence[str]], queries: Sequence[str]) -> list[list[str]]:
    tops = [list(run.get(query, ())[:_DEPTH]) for query in queries]
    for query, top in zip(queries, tops):
        if len(set(top)) != len(top):
            raise ValueError(f"query {query!r}: a document is ranked twice")
    return tops


def _trec_values(evaluator: pytrec_eval.RelevanceEvaluator, queries: Sequence[str], tops: list[list[str]],
                 measures: Sequence[str]) -> dict[str, np.ndarray]:
    # A query without a ranked document is left at 0, as trec_eval -c scores a qrels query the run lacks.
    out = {measure: np.zeros(len(queries)) for measure in measures}
    result = evaluator.evaluate({q: dict(zip(top, _SCORES)) for q, top in zip(queries, tops) if top})
    for i, query in enumerate(queries):
        if query in result:
            for measure in measures:
                out[measure][i] = result[query][_TREC_NAMES[measure]]
    return out


class QrelsEvaluator:
    """trec_eval's measures (MEASURES) of runs against one qrels source, built once and reused for every run.

    qrels: query id -> {doc id: integer grade}. The evaluated queries are those with a judgement, sorted; a run
    query without one is ignored (nothing judges it), a judged query the run lacks scores 0 (trec_eval -c).
    Documents without a judgement count as not relevant; AP, P@10 and R@100 count grade >= relevant_from as
    relevant, nDCG takes the grades as gains (as trec_eval, whatever the relevance level). judged@10 is the share
    of the top min(10, ranked) documents that have a judgement of any grade (ir_measures' Judged@10).
    """

    def __init__(self, qrels: Mapping[str, Mapping[str, int]], *, relevant_from: int = 1,
                 extra: Sequence[str] = (), pooled: Mapping[str, Iterable[str]] | None = None) -> None:
        """`extra`: measures of INCOMPLETE_MEASURES to compute too; `pooled`: query id -> the documents of its
        pool (judged or not), for infAP: those without a judgement are "pooled but unjudged" (-1)."""
        unknown = [measure for measure in extra if measure not in INCOMPLETE_MEASURES]
        if unknown:
            raise ValueError(f"unknown measure {unknown[0]!r}: the extra measures are {', '.join(INCOMPLETE_MEASURES)}")
        self.queries = tuple(sorted(query for query, docs in qrels.items() if docs))
        self.extra = tuple(measure for measure in INCOMPLETE_MEASURES if measure in extra)
        self._judged = [frozenset(qrels[query]) for query in self.queries]
        self._relevant = [frozenset(doc for doc, grade in qrels[query].items() if grade >= relevant_from)
                          for query in self.queries]
        self._evaluator = pytrec_eval.RelevanceEvaluator({query: dict(qrels[query]) for query in self.queries},
                                                         set(_TREC_NAMES.values()), relevance_level=relevant_from)
        self._incomplete = None
        if {"bpref", "infAP"} & set(self.extra):
            marked = {query: {**{doc: -1 for doc in (pooled or {}).get(query, ()) if doc not in qrels[query]},
                              **qrels[query]} for query in self.queries}
            self._incomplete = pytrec_eval.RelevanceEvaluator(marked, {"bpref", "infAP"},
                                                              relevance_level=relevant_from)

    def _ap(self, i: int, docs: Sequence[str]) -> float:
        # The ranks of the relevant documents in one pass at C speed: a dict of every document's rank would cost
        # more than the rest of the evaluation. trec_eval's map: precision at each relevant document's rank, summed
        # over all relevant (retrieved or not).
        ranks = list(compress(count(1), map(self._relevant[i].__contains__, docs)))
        return sum(k / r for k, r in enumerate(ranks, 1)) / len(self._relevant[i]) if ranks else 0.0

    def evaluate(self, run: Mapping[str, Sequence[str]]) -> QueryScores:
        """run: query id -> doc ids, best first, each at most once per query (as trec_eval requires; only the
        top 100 are checked, a full check would cost as much as the evaluation)."""
        ap, judged = np.zeros(len(self.queries)), np.zeros(len(self.queries))
        for i, query in enumerate(self.queries):
            docs = run.get(query, ())
            ap[i] = self._ap(i, docs)
            top = docs[:_TOP]
            if len(top):
                judged[i] = sum(doc in self._judged[i] for doc in top) / len(top)
        trec = _trec_values(self._evaluator, self.queries, _tops(run, self.queries), tuple(_TREC_NAMES))
        values = trec | {"AP": ap, "judged@10": judged} | self._extra_values(run)
        return QueryScores(self.queries, {measure: values[measure] for measure in MEASURES + self.extra})

    def _extra_values(self, run: Mapping[str, Sequence[str]]) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        if self._incomplete is not None:
            ranked = {q: {doc: float(len(run[q]) - rank) for rank, doc in enumerate(run[q])}
                      for q in self.queries if run.get(q)}
            result = self._incomplete.evaluate(ranked)
            for measure in ("bpref", "infAP"):
                out[measure] = np.array([result[q][measure] if q in result else 0.0 for q in self.queries])
        if "nDCG'@10" in self.extra or "AP'" in self.extra:
            condensed = {q: [doc for doc in run.get(q, ()) if doc in self._judged[i]]
                         for i, q in enumerate(self.queries)}
            out["nDCG'@10"] = _trec_values(self._evaluator, self.queries, _tops(condensed, self.queries),
                                           ("nDCG@10",))["nDCG@10"]
            out["AP'"] = np.array([self._ap(i, condensed[q]) for i, q in enumerate(self.queries)])
        return out


def evaluate_run(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]], *,
                 relevant_from: int = 1, extra: Sequence[str] = (),
                 pooled: Mapping[str, Iterable[str]] | None = None) -> QueryScores:
    """trec_eval's measures of one run; QrelsEvaluator when several runs meet the same qrels."""
    return QrelsEvaluator(qrels, relevant_from=relevant_from, extra=extra, pooled=pooled).evaluate(run)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    # trec_eval scores a query without relevant documents 0, not undefined.
    return np.divide(numerator, denominator, out=np.zeros(np.broadcast(numerator, denominator).shape),
                     where=denominator > 0)


def _discounts(position: np.ndarray) -> np.ndarray:
    # trec_eval's DCG discount 1 / log2(rank + 1) of a 0-based position, 0 below the top _DEPTH.
    return np.where(position < _DEPTH, 1.0 / np.log2(position + 2.0), 0.0)


@dataclass(frozen=True, eq=False)
class JudgedDocs:
    """Per evaluated query, its judged documents (in the order the probabilities gave them), their P (padded with
    0 to a common width) and their 0-based rank in the run (_DEPTH when not in its top _DEPTH)."""

    doc_ids: tuple[tuple[str, ...], ...]
    p: np.ndarray
    position: np.ndarray

    def take(self, rows: np.ndarray) -> JudgedDocs:
        return JudgedDocs(tuple(self.doc_ids[i] for i in rows), self.p[rows], self.position[rows])

    def binary_values(self, labels: np.ndarray) -> dict[str, np.ndarray]:
        """EXPECTED_MEASURES per query of 0/1 labels of the judged documents, shaped like `p` or (queries, draws,
        width): trec_eval's nDCG@10, nDCG@100, P@10 and R@100 of the run on the qrels of the labelled documents.
        Values are shaped (queries,) or (queries, draws)."""
        n, width = self.p.shape
        stacked = labels.reshape(n, -1, width).astype(np.float64, copy=False)
        discount = _discounts(self.position)
        weights = np.stack([self.position < _TOP, self.position < _DEPTH, discount * (self.position < _TOP),
                            discount], axis=-1).astype(np.float64)
        sums = np.matmul(stacked, weights)
        relevant = np.rint(stacked.sum(axis=-1)).astype(np.int64)
        values = {"nDCG@10": _ratio(sums[..., 2], _IDEAL_DCG[np.minimum(relevant, _TOP)]),
                  "nDCG@100": _ratio(sums[..., 3], _IDEAL_DCG[np.minimum(relevant, _DEPTH)]),
                  "P@10": sums[..., 0] / _TOP,
                  "R@100": _ratio(sums[..., 1], relevant.astype(np.float64))}
        return {measure: value.reshape(labels.shape[:-1]) for measure, value in values.items()}


@dataclass(frozen=True, eq=False)
class ExpectedScores(QueryScores):
    """QueryScores of the expected measures, whose intervals also draw the labels (module docstring)."""

    judged: JudgedDocs

    def _take(self, rows: np.ndarray) -> ExpectedScores:
        plain = super()._take(rows)
        return ExpectedScores(plain.queries, plain.values, self.judged.take(rows))

    def _draw_means(self, measures: tuple[str, ...], draws: int, seed: int) -> dict[str, np.ndarray]:
        n = len(self.queries)
        if n == 0 or draws < 1:
            return {measure: np.zeros(0) for measure in measures}
        # The query resampling is QueryScores' (same seed, same draws); the labels come from a stream of their own.
        labels_rng = np.random.default_rng([seed, 1])
        p = self.judged.p[:, None, :]
        step = max(1, _LABEL_CELLS // max(1, self.judged.p.size))
        parts: dict[str, list[np.ndarray]] = {measure: [] for measure in measures}
        for counts in resampling_counts(n, draws, seed):
            for start in range(0, len(counts), step):
                block = counts[start:start + step]
                labels = labels_rng.random((n, len(block), p.shape[2]))
                np.less(labels, p, out=labels)  # 0/1 in place: a third less memory traffic than a bool copy
                values = self.judged.binary_values(labels)
                for measure in measures:
                    parts[measure].append((block * values[measure].T).sum(axis=1) / n)
        return {measure: np.concatenate(parts[measure]) for measure in measures}


def _ideal_dcg(p: np.ndarray, depth: int) -> np.ndarray:
    best = -np.sort(-p, axis=1)[:, :depth]
    return best @ (1.0 / np.log2(np.arange(2, best.shape[1] + 2)))


class ExpectedEvaluator:
    """EXPECTED_MEASURES of runs when each judged document is relevant with its calibrated probability.

    probabilities: query id -> {doc id: P in [0, 1]}; the evaluated queries are those with at least one, sorted.
    Built once per probabilities and reused for every run. nDCG with gain P is computed here, exactly, rather
    than by pytrec_eval: trec_eval takes integer gains only, and its ideal DCG walks every integer level up to
    the largest gain, so gains scaled to keep six digits (models_llm.metrics.ranking.GAIN_SCALE) cost seconds
    per run.
    """

    def __init__(self, probabilities: Mapping[str, Mapping[str, float]]) -> None:
        self.queries = tuple(sorted(query for query, docs in probabilities.items() if docs))
        self._doc_ids = tuple(tuple(probabilities[query]) for query in self.queries)
        self._p = np.zeros((len(self.queries), max((len(docs) for docs in self._doc_ids), default=0)))
        for i, query in enumerate(self.queries):
            self._p[i, :len(self._doc_ids[i])] = list(probabilities[query].values())
        if not np.all((self._p >= 0) & (self._p <= 1)):
            raise ValueError("probabilities must lie in [0, 1]")
        self._ideal = {"nDCG@10": _ideal_dcg(self._p, _TOP), "nDCG@100": _ideal_dcg(self._p, _DEPTH)}

    def evaluate(self, run: Mapping[str, Sequence[str]]) -> ExpectedScores:
        """run: query id -> doc ids, best first."""
        position = np.full(self._p.shape, _DEPTH, dtype=np.int64)
        for i, (docs, top) in enumerate(zip(self._doc_ids, _tops(run, self.queries))):
            rank = dict(zip(top, range(len(top))))
            position[i, :len(docs)] = [rank.get(doc, _DEPTH) for doc in docs]
        gain = self._p * _discounts(position)
        in_top = position < _TOP
        values = {"nDCG@10": _ratio((gain * in_top).sum(axis=1), self._ideal["nDCG@10"]),
                  "nDCG@100": _ratio(gain.sum(axis=1), self._ideal["nDCG@100"]),
                  "P@10": (self._p * in_top).sum(axis=1) / _TOP,
                  "R@100": _ratio((self._p * (position < _DEPTH)).sum(axis=1), self._p.sum(axis=1))}
        return ExpectedScores(self.queries, {measure: values[measure] for measure in EXPECTED_MEASURES},
                              JudgedDocs(self._doc_ids, self._p, position))


def evaluate_expected(run: Mapping[str, Sequence[str]],
                      probabilities: Mapping[str, Mapping[str, float]]) -> ExpectedScores:
    """EXPECTED_MEASURES of one run; ExpectedEvaluator when several runs meet the same probabilities."""
    return ExpectedEvaluator(probabilities).evaluate(run)
