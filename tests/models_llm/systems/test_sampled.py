"""statAP and infNDCG@10 from a sample with known inclusion probabilities: a hand computation from the formulas,
trec_eval's AP and nDCG@10 (pytrec_eval) when every pool document is judged, and a simulation with known truth."""
from math import log2

import numpy as np
import pytest
import pytrec_eval

from models_llm.systems.sampled import QuerySample, SampledEvaluator

# Two strata: the top {a, b}, both judged (pi = 1); the rest {c, d, e, f}, of which c and e were judged (pi = 1/2).
STRATA = {"a": "top", "b": "top", "c": "rest", "d": "rest", "e": "rest", "f": "rest"}
GRADES = {"a": 1, "b": 0, "c": 1, "e": 0}


def test_stat_ap_by_hand():
    run = {"q": ["x", "a", "b", "c", "d"]}  # x is outside the pool
    found = SampledEvaluator({"q": QuerySample(STRATA, GRADES)}).evaluate(run)
    # R^ = 1/1 (a) + 1/(1/2) (c) = 3.
    # a at rank 2: PC^ = (1 + nothing above) / 2 = 1/2, weighted 1/pi_a = 1.
    # c at rank 4: PC^ = (1 + a's 1/pi = 1) / 4 = 1/2, weighted 1/pi_c = 2.
    expected = (1 * (1 / 2) + 2 * (2 / 4)) / 3
    assert found.values["statAP"][0] == pytest.approx(expected)
    assert found.values["judged@10"][0] == pytest.approx(3 / 5)


def test_inf_ndcg_by_hand():
    run = {"q": ["x", "a", "b", "d", "c", "f"]}
    found = SampledEvaluator({"q": QuerySample(STRATA, GRADES)}).evaluate(run)
    # Gains: x 0 (not pooled), a 1, b 0, d not sampled in "rest": the mean grade of c and e = 1/2, c 1, f 1/2.
    dcg = 1 / log2(3) + 0 + 0.5 / log2(5) + 1 / log2(6) + 0.5 / log2(7)
    # N^_1 = 1 (a) + 2 (c) = 3 documents of grade 1: the ideal ranking puts them first.
    ideal = 1 / log2(2) + 1 / log2(3) + 1 / log2(4)
    assert found.values["infNDCG@10"][0] == pytest.approx(dcg / ideal)


def test_graded_ideal_rounds_each_grades_estimated_count():
    strata = {f"d{i}": "all" for i in range(6)}
    # 3 of 6 sampled (pi = 1/2): N^_2 = 2, N^_1 = 2, and one grade 0.
    grades = {"d0": 2, "d1": 1, "d2": 0}
    found = SampledEvaluator({"q": QuerySample(strata, grades)}).evaluate({"q": ["d0", "d3"]})
    dcg = 2 / log2(2) + (3 / 3) / log2(3)  # d3 unsampled: the mean grade (2 + 1 + 0) / 3
    ideal = 2 / log2(2) + 2 / log2(3) + 1 / log2(4) + 1 / log2(5)
    assert found.values["infNDCG@10"][0] == pytest.approx(dcg / ideal)


def test_a_census_gives_trec_evals_ap_and_ndcg():
    rng = np.random.default_rng(3)
    qrels, runs = {}, {}
    for q in range(8):
        docs = [f"q{q}d{i}" for i in range(40)]
        qrels[f"q{q}"] = {doc: int(rng.choice([0, 0, 0, 1, 2])) for doc in docs}
        ranked = list(rng.permutation(docs + [f"q{q}new{i}" for i in range(10)]))[:30]
        runs[f"q{q}"] = ranked
    samples = {q: QuerySample({doc: "pool" for doc in grades}, grades) for q, grades in qrels.items()}
    found = SampledEvaluator(samples).evaluate(runs)
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"map", "ndcg_cut_10"}).evaluate(
        {q: {doc: float(100 - i) for i, doc in enumerate(docs)} for q, docs in runs.items()})
    for i, q in enumerate(found.queries):
        assert found.values["statAP"][i] == pytest.approx(trec[q]["map"], abs=1e-4)
        assert found.values["infNDCG@10"][i] == pytest.approx(trec[q]["ndcg_cut_10"], abs=1e-4)


def test_stratified_samples_estimate_the_true_measures():
    """Known truth: 300 pool documents, relevant with probability 0.6 in the top stratum (30) and 0.08 in the rest,
    sampled as DIRAS does (10 of the top 30, 20 of the rest). Over 2,000 worlds, each with its own grades and
    sample, the estimates centre on trec_eval's AP and nDCG@10 of the full grades (infNDCG assumes the unjudged
    documents of a stratum are like its judged ones, which these worlds hold)."""
    rng = np.random.default_rng(1)
    docs = [f"d{i}" for i in range(300)]
    run = list(rng.permutation(docs[:60])) + docs[60:]
    scores = {doc: float(300 - i) for i, doc in enumerate(run)}
    strata = {doc: "top" if i < 30 else "rest" for i, doc in enumerate(docs)}
    errors, spread = [], []
    for _ in range(2000):
        truth = {doc: int(rng.random() < (0.6 if i < 30 else 0.08)) for i, doc in enumerate(docs)}
        exact = pytrec_eval.RelevanceEvaluator({"q": truth}, {"map", "ndcg_cut_10"}).evaluate({"q": scores})["q"]
        chosen = [*rng.choice(30, 10, replace=False), *(30 + rng.choice(270, 20, replace=False))]
        sample = QuerySample(strata, {docs[i]: truth[docs[i]] for i in chosen})
        found = SampledEvaluator({"q": sample}).evaluate({"q": run})
        errors.append((found.values["statAP"][0] - exact["map"], found.values["infNDCG@10"][0] - exact["ndcg_cut_10"]))
        spread.append(found.values["statAP"][0])
    bias = np.mean(errors, axis=0)
    assert abs(bias[0]) < 0.02
    assert abs(bias[1]) < 0.02
    # Not a constant: single samples spread around the truth.
    assert np.std(spread) > 0.05


def test_a_sampled_document_outside_the_pool_is_refused():
    with pytest.raises(ValueError, match=r"query 'q'.*'z'.*no stratum"):
        SampledEvaluator({"q": QuerySample({"a": 0}, {"z": 1})})


def test_queries_without_a_sampled_document_are_not_evaluated_and_missing_ones_score_zero():
    samples = {"q1": QuerySample(STRATA, GRADES), "q2": QuerySample({"a": 0}, {})}
    found = SampledEvaluator(samples).evaluate({})
    assert found.queries == ("q1",)
    assert found.values["statAP"][0] == 0.0 and found.values["infNDCG@10"][0] == 0.0
