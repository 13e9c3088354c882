"""Measures from qrels made from a sample whose inclusion probabilities are known: statAP and infNDCG@k.

The design. For each query, its pool (the candidates that could have been judged) is cut into strata, and a simple
random sample without replacement of n_s of the N_s documents of stratum s is judged, so that every document of s
was included with probability pi_s = n_s / N_s. One stratum per query is the product's random validation sample
(its pairs of a query are a simple random sample of that query's pool, given how many it holds); DIRAS's
distillation sample ("30 each from in the top-5 and outside the top-5") has two. A document outside the pool has
no stratum and counts as not relevant (gain 0), as in trec_eval.

statAP (Aslam, Pavlu & Yilmaz, SIGIR 2006; Pavlu & Aslam 2007, the TREC Million Query tracks' estimator of AP).
AP = 1/R * sum over relevant retrieved d of PC(r(d)), PC(r) the precision at rank r. With S the sampled documents,
x_d = 1 when d is relevant (grade >= relevant_from), r(d) its rank in the run, each unknown total is replaced by its
Horvitz-Thompson estimate:

    R^          = sum_{d in S} x_d / pi_d                              (estimated number of relevant documents)
    PC^(r(d))   = 1/r(d) * (1 + sum_{d' in S, r(d') < r(d)} x_d' / pi_d')
    statAP      = 1/R^ * sum_{d in S, retrieved} x_d * PC^(r(d)) / pi_d

In PC^ the document d itself counts once: the term is only there when d was sampled and is relevant (weighting it
1/pi_d a second time would inflate every precision by 1/pi: a simulation of 2,000 samples put that reading at
0.65 against a true AP of 0.44, this one at 0.45). With every pool document judged (pi = 1) statAP is trec_eval's
AP. A query without a sampled relevant document (R^ = 0) scores 0, as AP does without a relevant document. On a
small sample statAP may exceed 1.

infNDCG@k (Yilmaz, Kanoulas & Aslam, SIGIR 2008, "A simple and efficient sampling method for estimating AP and
NDCG"). The gain of the document at rank r <= k is its grade when it was sampled; when it is in stratum s but was
not sampled, the mean grade of the sampled documents of s (its expected gain under the design); outside the pool, 0:

    DCG^@k  = sum_{r <= k} g^(d_r) / log2(r + 1)
    N^_g    = sum_{d in S, grade(d) = g} 1 / pi_d                       (estimated number of documents of grade g)
    IDCG^@k = the DCG@k of the ideal ranking holding round(N^_g) documents of each grade g > 0, best first
              (rounded to the nearest whole document, halves up)
    infNDCG@k = DCG^@k / IDCG^@k                                        (0 when IDCG^@k = 0)

Gains are the grades, as trec_eval's nDCG takes them. With every pool document judged it is trec_eval's nDCG@k.
Both are ratio estimators: nearly unbiased for many sampled documents, not exactly for few.
"""
from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from models_llm.systems.evaluation import SAMPLE_MEASURES, QueryScores

# judged@10 of a sampled source: the share of the top 10 that the sample graded.
JUDGED = "judged@10"
_K = 10


@dataclass(frozen=True)
class QuerySample:
    """One query's design: `strata` maps every pool document to its stratum; `grades` the sampled documents (each
    in `strata`) to their grade."""

    strata: Mapping[str, Hashable]
    grades: Mapping[str, int]


class _Prepared:
    """What a query's estimates need, computed once for every run."""

    def __init__(self, query: str, sample: QuerySample, relevant_from: int, k: int) -> None:
        missing = [doc for doc in sample.grades if doc not in sample.strata]
        if missing:
            raise ValueError(f"query {query!r}: sampled document {missing[0]!r} is in no stratum of the pool")
        sizes: dict[Hashable, int] = {}
        for stratum in sample.strata.values():
            sizes[stratum] = sizes.get(stratum, 0) + 1
        drawn: dict[Hashable, list[int]] = {}
        for doc, grade in sample.grades.items():
            drawn.setdefault(sample.strata[doc], []).append(grade)
        self.strata = sample.strata
        self.grades = sample.grades
        # 1 / pi_s = N_s / n_s for every sampled document's stratum.
        self.weight = {stratum: sizes[stratum] / len(grades) for stratum, grades in drawn.items()}
        self.mean_gain = {stratum: sum(grades) / len(grades) for stratum, grades in drawn.items()}
        self.relevant_from = relevant_from
        self.total_relevant = sum(self.weight[sample.strata[doc]] for doc, grade in sample.grades.items()
                                  if grade >= relevant_from)
        counts: dict[int, float] = {}
        for doc, grade in sample.grades.items():
            if grade > 0:
                counts[grade] = counts.get(grade, 0.0) + self.weight[sample.strata[doc]]
        ideal = [grade for grade in sorted(counts, reverse=True) for _ in range(int(np.floor(counts[grade] + 0.5)))]
        self.ideal_dcg = sum(gain / np.log2(rank + 2) for rank, gain in enumerate(ideal[:k]))
        self.k = k

    def stat_ap(self, docs: Sequence[str]) -> float:
        if self.total_relevant <= 0:
            return 0.0
        found = total = 0.0
        for rank, doc in enumerate(docs, 1):
            grade = self.grades.get(doc)
            if grade is None or grade < self.relevant_from:
                continue
            weight = self.weight[self.strata[doc]]
            # The document itself is given (it was sampled and is relevant): it counts once in its own precision,
            # the sampled relevant ones above it 1 / pi each.
            total += weight * (1.0 + found) / rank
            found += weight
        return total / self.total_relevant

    def inf_ndcg(self, docs: Sequence[str]) -> float:
        if self.ideal_dcg <= 0:
            return 0.0
        dcg = 0.0
        for rank, doc in enumerate(docs[:self.k]):
            grade = self.grades.get(doc)
            if grade is None:
                stratum = self.strata.get(doc)
                grade = self.mean_gain.get(stratum, 0.0) if stratum is not None else 0.0
            dcg += grade / np.log2(rank + 2)
        return dcg / self.ideal_dcg

    def judged(self, docs: Sequence[str]) -> float:
        top = docs[:_K]
        return sum(doc in self.grades for doc in top) / len(top) if len(top) else 0.0


class SampledEvaluator:
    """statAP and infNDCG@10 (and judged@10) of runs against one sampled qrels, built once for every run.

    samples: query id -> QuerySample. The evaluated queries are those with a sampled document, sorted; a run that
    lacks one of them scores 0 on it (trec_eval -c)."""

    def __init__(self, samples: Mapping[str, QuerySample], *, relevant_from: int = 1) -> None:
        self.queries = tuple(sorted(query for query, sample in samples.items() if sample.grades))
        self._prepared = [_Prepared(query, samples[query], relevant_from, _K) for query in self.queries]

    def evaluate(self, run: Mapping[str, Sequence[str]]) -> QueryScores:
        """run: query id -> doc ids, best first."""
        values = {measure: np.zeros(len(self.queries)) for measure in (*SAMPLE_MEASURES, JUDGED)}
        for i, (query, prepared) in enumerate(zip(self.queries, self._prepared)):
            docs = run.get(query, ())
            if len(set(docs[:100])) != len(docs[:100]):
                raise ValueError(f"query {query!r}: a document is ranked twice")
            values["statAP"][i] = prepared.stat_ap(docs)
            values["infNDCG@10"][i] = prepared.inf_ndcg(docs)
            values[JUDGED][i] = prepared.judged(docs)
        return QueryScores(self.queries, values)
