"""System evaluation against pytrec_eval called here on the raw runs, ir_measures' Judged@10, hand computations,
and Monte-Carlo draws of the labels for the expected measures."""
import random

import ir_measures
import numpy as np
import pytest
import pytrec_eval
from ir_measures import Judged

from models_llm.metrics.ranking import GAIN_SCALE
from models_llm.systems.evaluation import (
    EXPECTED_MEASURES,
    MEASURES,
    QrelsEvaluator,
    QueryScores,
    evaluate_expected,
    evaluate_run,
    trec_order,
)

TREC = {"nDCG@10": "ndcg_cut_10", "nDCG@100": "ndcg_cut_100", "AP": "map", "P@10": "P_10", "R@100": "recall_100"}


def pytrec_reference(scored_run, qrels, relevant_from):
    """Per query and measure, pytrec_eval on runs given as scores; a qrels query the run lacks scores 0."""
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, set(TREC.values()), relevance_level=relevant_from)
    result = evaluator.evaluate({q: docs for q, docs in scored_run.items() if q in qrels and docs})
    return {q: {m: result.get(q, {}).get(name, 0.0) for m, name in TREC.items()}
            for q in sorted(q for q in qrels if qrels[q])}


def judged_reference(run, qrels):
    # ir_measures orders tied scores its own way, so it gets distinct scores in the given order.
    scored = {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items() if docs}
    found = {m.query_id: m.value for m in ir_measures.judged.iter_calc([Judged @ 10], qrels, scored)}
    return {q: found.get(q, 0.0) for q in qrels if qrels[q]}


def by_position(run):
    return {q: {d: float(len(docs) - i) for i, d in enumerate(docs)} for q, docs in run.items()}


def assert_matches(scores, reference_trec, reference_judged):
    assert scores.queries == tuple(sorted(reference_trec))
    assert set(scores.values) == set(MEASURES)
    for i, query in enumerate(scores.queries):
        for measure in TREC:
            assert scores.values[measure][i] == pytest.approx(reference_trec[query][measure], abs=1e-9), \
                (query, measure)
        assert scores.values["judged@10"][i] == pytest.approx(reference_judged[query], abs=1e-12), query


# Graded qrels: q1 mixes grades and unjudged documents, q2 has no relevant document, q3 is absent from the run,
# and the run's q4 has no judgements (ignored).
QRELS = {"q1": {"a": 3, "b": 0, "c": 1, "d": 2, "e": 1, "z": 2},
         "q2": {"a": 0, "f": 0},
         "q3": {"a": 1, "b": 2}}
# Scores with ties; trec_eval orders tied documents by id descending, so each tie below lists the larger id first.
SCORED = {"q1": {"a": 2.0, "b": 5.0, "c": 5.0, "u1": 5.0, "d": 1.0, "x": 1.0, "e": 0.5},
          "q2": {"a": 3.0, "f": 3.0, "g": 1.0},
          "q4": {"a": 1.0}}
RANKED = {"q1": ["u1", "c", "b", "a", "x", "d", "e"],
          "q2": ["f", "a", "g"],
          "q4": ["a"]}


@pytest.mark.parametrize("relevant_from", [1, 2, 3])
def test_hand_made_runs_equal_pytrec_eval_on_the_tied_scores(relevant_from):
    scores = evaluate_run(RANKED, QRELS, relevant_from=relevant_from)
    assert_matches(scores, pytrec_reference(SCORED, QRELS, relevant_from), judged_reference(RANKED, QRELS))
    assert scores.queries == ("q1", "q2", "q3")
    q3 = scores.queries.index("q3")
    assert all(scores.values[m][q3] == 0 for m in MEASURES)
    # By hand, relevant_from 1 in q1: relevant a, c, d, e, z (5) at ranks 4, 2, 6, 7 -> AP = (1/2 + 2/4 + 3/6 +
    # 4/7) / 5; judged@10 = 5 judged of 7 ranked.
    if relevant_from == 1:
        assert scores.values["AP"][0] == pytest.approx((1 / 2 + 2 / 4 + 3 / 6 + 4 / 7) / 5, abs=1e-12)
        assert scores.values["judged@10"][0] == pytest.approx(5 / 7)


def test_trec_order_is_trec_eval_tie_break():
    rng = random.Random(3)
    names = ["a", "b", "ab", "B", "é", "z", "zz", "10", "9", "d-1", "d_1", "Ω", "x y"]
    ascending_differs = False
    for _ in range(30):
        qrels, scored, ordered, ascending = {}, {}, {}, {}
        for q in range(8):
            docs = rng.sample(names, rng.randint(2, len(names)))
            raw = [float(rng.choice([0, 1, 2])) for _ in docs]
            scored[f"q{q}"] = dict(zip(docs, raw))
            ordered[f"q{q}"] = trec_order(docs, raw)
            ascending[f"q{q}"] = [d for d, _ in sorted(zip(docs, raw), key=lambda p: (-p[1], p[0]))]
            qrels[f"q{q}"] = {d: rng.choice([0, 1, 2]) for d in rng.sample(names, 5)}
        expected = pytrec_reference(scored, qrels, 1)
        ours = evaluate_run(ordered, qrels)
        for i, query in enumerate(ours.queries):
            for measure in TREC:
                assert ours.values[measure][i] == pytest.approx(expected[query][measure], abs=1e-12)
        other = evaluate_run(ascending, qrels)
        ascending_differs |= any(not np.allclose(other.values[m], ours.values[m]) for m in TREC)
    # Ties broken by ascending id would have failed the comparison above.
    assert ascending_differs
    assert trec_order(["a", "b", "c", "é"], [1.0, 2.0, 1.0, 1.0]) == ["b", "é", "c", "a"]
    assert evaluate_run({"q": ["a", "b"]}, {"q": {"a": 1}}).values["AP"][0] == 1.0
    assert evaluate_run({"q": trec_order(["a", "b"], [1.0, 1.0])}, {"q": {"a": 1}}).values["AP"][0] == 0.5


def random_setting(seed, n_queries=40, grades=4):
    rng = random.Random(seed)
    corpus = [f"doc{i}" for i in range(400)]
    qrels, run = {}, {}
    for q in range(n_queries):
        judged = rng.sample(corpus, rng.randint(1, 40))
        qrels[f"q{q}"] = {d: rng.randrange(grades) for d in judged}
        if rng.random() < 0.9:
            # Runs of 0 to 300 documents drawn mostly from the judged ones, so that deep relevant documents occur.
            pool = judged + rng.sample(corpus, 80)
            run[f"q{q}"] = list(dict.fromkeys(rng.sample(pool, rng.randint(0, len(pool)))))
            run[f"q{q}"] += [d for d in rng.sample(corpus, rng.randint(0, 200)) if d not in run[f"q{q}"]]
    run["unjudged query"] = corpus[:50]
    return run, qrels


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_runs_equal_pytrec_eval_and_ir_measures(seed):
    run, qrels = random_setting(seed)
    for relevant_from in (1, 2):
        evaluator = QrelsEvaluator(qrels, relevant_from=relevant_from)
        scores = evaluator.evaluate(run)
        assert_matches(scores, pytrec_reference(by_position(run), qrels, relevant_from), judged_reference(run, qrels))
        # The evaluator is reused across runs.
        other = {q: list(reversed(docs)) for q, docs in run.items()}
        assert_matches(evaluator.evaluate(other), pytrec_reference(by_position(other), qrels, relevant_from),
                       judged_reference(other, qrels))


def test_a_document_ranked_twice_is_refused():
    with pytest.raises(ValueError, match="twice"):
        evaluate_run({"q": ["a", "b", "a"]}, {"q": {"a": 1}})


def test_mean_interval_and_subset():
    rng = np.random.default_rng(5)
    values = rng.normal(0.5, 0.2, 400)
    scores = QueryScores(tuple(f"q{i:03d}" for i in range(400)), {"AP": values, "P@10": np.full(400, 0.3)})
    assert scores.mean("AP") == pytest.approx(values.mean())
    # Percentile bootstrap of a mean of 400 values: close to the normal interval mean +- 1.96 standard errors.
    low, high = scores.interval("AP", draws=4000, seed=1)
    half = 1.96 * values.std() / np.sqrt(400)
    assert low == pytest.approx(values.mean() - half, abs=0.15 * half)
    assert high == pytest.approx(values.mean() + half, abs=0.15 * half)
    assert scores.interval("P@10", draws=200) == pytest.approx((0.3, 0.3))
    assert scores.intervals(draws=300, seed=2)["AP"] == pytest.approx(scores.interval("AP", draws=300, seed=2))
    group = scores.subset(["q010", "q002", "not evaluated", "q002"])
    assert group.queries == ("q002", "q010")
    assert list(group.values["AP"]) == [values[2], values[10]]
    empty = scores.subset([])
    assert empty.mean("AP") is None and empty.interval("AP") is None


def random_probabilities(seed, n_queries=30, binary=False):
    rng = random.Random(seed)
    run, qrels = random_setting(seed, n_queries)
    probabilities = {q: {d: float(rng.random() < 0.4) if binary else rng.choice([0.0, 1.0, rng.random()])
                         for d in docs} for q, docs in qrels.items()}
    return run, probabilities


def test_expected_measures_with_certain_labels_are_the_binary_measures():
    run, probabilities = random_probabilities(8, binary=True)
    expected = evaluate_expected(run, probabilities)
    binary = evaluate_run(run, {q: {d: int(p) for d, p in docs.items()} for q, docs in probabilities.items()})
    assert expected.queries == binary.queries
    for measure in EXPECTED_MEASURES:
        np.testing.assert_allclose(expected.values[measure], binary.values[measure], rtol=0, atol=1e-12)


def test_expected_measures_by_hand_and_against_pytrec_eval_gains():
    run, probabilities = random_probabilities(9)
    expected = evaluate_expected(run, probabilities)
    gains = {q: {d: round(p * GAIN_SCALE) for d, p in docs.items()} for q, docs in probabilities.items()}
    reference = pytrec_eval.RelevanceEvaluator(gains, {"ndcg_cut_10", "ndcg_cut_100"}).evaluate(
        {q: docs for q, docs in by_position(run).items() if q in gains and docs})
    for i, query in enumerate(expected.queries):
        ranked = run.get(query, [])
        p = probabilities[query]
        assert expected.values["P@10"][i] == pytest.approx(sum(p.get(d, 0.0) for d in ranked[:10]) / 10, abs=1e-12)
        total = sum(p.values())
        recall = sum(p.get(d, 0.0) for d in ranked[:100]) / total if total else 0.0
        assert expected.values["R@100"][i] == pytest.approx(recall, abs=1e-12)
        for measure, name in (("nDCG@10", "ndcg_cut_10"), ("nDCG@100", "ndcg_cut_100")):
            assert expected.values[measure][i] == pytest.approx(reference.get(query, {}).get(name, 0.0), abs=1e-6)
    # One query by hand: P 0.5, 0.2 ranked first and third, 0.8 unretrieved. nDCG@10 = (0.5 + 0.2 / log2(4)) /
    # (0.8 + 0.5 / log2(3) + 0.2 / log2(4)); P@10 = 0.7 / 10; R@100 = 0.7 / 1.5.
    hand = evaluate_expected({"q": ["a", "x", "b"]}, {"q": {"a": 0.5, "b": 0.2, "c": 0.8}})
    assert hand.values["nDCG@10"][0] == pytest.approx((0.5 + 0.1) / (0.8 + 0.5 / np.log2(3) + 0.1), abs=1e-12)
    assert hand.values["P@10"][0] == pytest.approx(0.07) and hand.values["R@100"][0] == pytest.approx(0.7 / 1.5)


def test_one_draw_of_labels_equals_pytrec_eval_on_its_binary_qrels():
    run, probabilities = random_probabilities(10)
    judged = evaluate_expected(run, probabilities).judged
    rng = np.random.default_rng(0)
    for _ in range(5):
        labels = rng.random(judged.p.shape) < judged.p
        drawn = judged.binary_values(labels)
        qrels = {q: {d: int(labels[i, j]) for j, d in enumerate(judged.doc_ids[i])}
                 for i, q in enumerate(evaluate_expected(run, probabilities).queries)}
        reference = evaluate_run(run, qrels)
        for measure in EXPECTED_MEASURES:
            np.testing.assert_allclose(drawn[measure], reference.values[measure], rtol=0, atol=1e-12)
        # Several draws at once give each draw's values.
        stacked = judged.binary_values(np.stack([labels, ~labels], axis=1))
        np.testing.assert_array_equal(stacked["P@10"][:, 0], drawn["P@10"])


def monte_carlo(run, probabilities, draws, seed):
    """Mean over queries of the binary measures, by evaluate_run, for `draws` draws of the labels."""
    rng = random.Random(seed)
    out = {measure: [] for measure in EXPECTED_MEASURES}
    for _ in range(draws):
        qrels = {q: {d: int(rng.random() < p) for d, p in docs.items()} for q, docs in probabilities.items()}
        scores = evaluate_run(run, qrels)
        for measure in EXPECTED_MEASURES:
            out[measure].append(scores.mean(measure))
    return {measure: np.array(values) for measure, values in out.items()}


def test_interval_covers_the_measure_over_label_draws():
    run, probabilities = random_probabilities(11, n_queries=25)
    expected = evaluate_expected(run, probabilities)
    draws = monte_carlo(run, probabilities, 300, seed=4)
    intervals = expected.intervals(draws=1000, seed=3)
    for measure in EXPECTED_MEASURES:
        low, high = intervals[measure]
        assert low <= draws[measure].mean() <= high, measure
        # Wider than the labels' spread alone, which it includes.
        assert high - low >= np.percentile(draws[measure], 97.5) - np.percentile(draws[measure], 2.5), measure
    assert expected.mean("P@10") == pytest.approx(draws["P@10"].mean(), abs=4 * draws["P@10"].std() / np.sqrt(300))


def test_one_query_interval_is_the_spread_of_its_labels():
    # With one query the resampling is trivial: the interval is the spread of the measure over label draws.
    probabilities = {"q": {f"d{i}": p for i, p in enumerate(np.linspace(0.05, 0.95, 20))}}
    run = {"q": [f"d{i}" for i in range(0, 20, 2)] + [f"u{i}" for i in range(95)] + [f"d{i}" for i in range(1, 20, 2)]}
    expected = evaluate_expected(run, probabilities)
    draws = monte_carlo(run, probabilities, 3000, seed=5)
    for measure in EXPECTED_MEASURES:
        low, high = expected.interval(measure, draws=3000, seed=6)
        # P@10 moves in steps of 0.1, so its percentiles may land one step apart.
        tolerance = 0.1 + 1e-9 if measure == "P@10" else 0.05
        assert low == pytest.approx(np.percentile(draws[measure], 2.5), abs=tolerance), measure
        assert high == pytest.approx(np.percentile(draws[measure], 97.5), abs=tolerance), measure


def test_expected_subset_keeps_the_labels_with_their_queries():
    run, probabilities = random_probabilities(12)
    expected = evaluate_expected(run, probabilities)
    group = ["q3", "q7", "q12"]
    part = expected.subset(group)
    alone = evaluate_expected(run, {q: probabilities[q] for q in group})
    assert part.queries == alone.queries
    for measure in EXPECTED_MEASURES:
        np.testing.assert_allclose(part.values[measure], alone.values[measure], rtol=0, atol=1e-12)
    assert part.judged.doc_ids == alone.judged.doc_ids
    width = alone.judged.p.shape[1]
    np.testing.assert_array_equal(part.judged.p[:, :width], alone.judged.p)
    np.testing.assert_array_equal(part.judged.position[:, :width], alone.judged.position)
    low, high = part.interval("nDCG@10", draws=300)
    assert low <= part.mean("nDCG@10") <= high


def test_probabilities_outside_the_unit_interval_are_refused():
    with pytest.raises(ValueError):
        evaluate_expected({}, {"q": {"a": 1.5}})
