"""Measures for incomplete judgments (#34) against trec_eval (pytrec_eval) and a hand computation: bpref and infAP
on qrels with pooled-but-unjudged documents (-1), and the condensed-list nDCG'@10 and AP'."""
import pytest
import pytrec_eval

from models_llm.systems.evaluation import QrelsEvaluator, evaluate_run

QRELS = {"q1": {"a": 1, "b": 0, "d": 1, "e": 0}, "q2": {"f": 2, "g": 0, "h": 1, "i": 0, "j": 0}}
POOLED = {"q1": ["a", "b", "c", "d", "e"], "q2": ["f", "g", "h", "i", "j", "k", "l"]}
RUN = {"q1": ["a", "x", "c", "b", "d"], "q2": ["k", "g", "f", "l", "i", "h", "m", "j"]}


def trec(qrels, run, measures):
    ranked = {q: {doc: float(len(docs) - i) for i, doc in enumerate(docs)} for q, docs in run.items()}
    return pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(ranked)


def test_bpref_and_infap_are_trec_evals_with_pooled_unjudged_documents_marked():
    scores = evaluate_run(RUN, QRELS, extra=["bpref", "infAP"], pooled=POOLED)
    marked = {q: {**{d: -1 for d in POOLED[q] if d not in QRELS[q]}, **QRELS[q]} for q in QRELS}
    reference = trec(marked, RUN, {"bpref", "infAP"})
    for i, q in enumerate(scores.queries):
        assert scores.values["bpref"][i] == pytest.approx(reference[q]["bpref"])
        assert scores.values["infAP"][i] == pytest.approx(reference[q]["infAP"])
    # By hand, q1: relevant a (rank 1) and d (rank 5); judged non-relevant b, e. bpref = (1 + (1 - 1/2)) / 2.
    # infAP: a gives 1; d at k = 5 has 3 pooled documents above it (a, c, b), 1 relevant and 1 non-relevant
    # judged: 1/5 + 4/5 * 3/4 * (1 + e) / (2 + 2e) = 0.5; infAP = (1 + 0.5) / 2.
    assert scores.values["bpref"][0] == pytest.approx(0.75)
    assert scores.values["infAP"][0] == pytest.approx(0.75, abs=1e-5)
    # Without the pool, c is not "pooled but unjudged": infAP of q1 falls to (1 + 0.4) / 2.
    assert evaluate_run(RUN, QRELS, extra=["infAP"]).values["infAP"][0] == pytest.approx(0.7, abs=1e-5)


def test_the_condensed_list_measures_drop_unjudged_documents_first():
    scores = evaluate_run(RUN, QRELS, extra=["nDCG'@10", "AP'"])
    condensed = {q: [d for d in docs if d in QRELS[q]] for q, docs in RUN.items()}
    reference = trec(QRELS, condensed, {"ndcg_cut_10", "map"})
    for i, q in enumerate(scores.queries):
        assert scores.values["nDCG'@10"][i] == pytest.approx(reference[q]["ndcg_cut_10"])
        assert scores.values["AP'"][i] == pytest.approx(reference[q]["map"])
    # q2 condensed is g, f, i, h, j: AP' = (1/2 + 2/4) / 2, above its AP on the full list (unjudged k, l in the way).
    assert scores.values["AP'"][1] == pytest.approx(0.5) and scores.values["AP"][1] < 0.5
    assert set(scores.values) == {"nDCG@10", "nDCG@100", "AP", "P@10", "R@100", "judged@10", "nDCG'@10", "AP'"}
    with pytest.raises(ValueError, match="unknown measure"):
        QrelsEvaluator(QRELS, extra=["statAP"])
