"""BM25 runs against bm25s' own scoring API (get_scores on every passage, not its retrieve path) and against
Lucene's BM25 computed by hand."""
from importlib.metadata import version
from math import log

import bm25s
import numpy as np
import pytest
import Stemmer

from models_llm.retrieval import bm25
from models_llm.retrieval.bm25 import BM25Params, bm25_retrieve

CORPUS = [
    "Wildfire evacuation orders were issued for three counties.",
    "The flood warning covers the river valley until Friday.",
    "Evacuation shelters opened after the flooding of the valley.",
    "Quarterly earnings rose on strong cloud revenue.",
    "",
    "Firefighters contained the wildfire near the valley.",
    "The flood warning covers the river valley until Friday.",  # a duplicate of 1: an exact tie
    "Evacuating residents were told to avoid flooded roads; floods keep rising.",
]
QUERIES = ["flood evacuation", "wildfire", "cloud earnings revenue", "the of and", "valley floods warnings"]


def _reference(params: BM25Params, depth: int) -> list[list[tuple[int, float]]]:
    """bm25s' get_scores for every passage, positive ones sorted by score then position, cut at depth."""
    stemmer = Stemmer.Stemmer(params.stemmer) if params.stemmer else None
    corpus_tokens = bm25s.tokenize(CORPUS, stopwords=params.stopwords, stemmer=stemmer, show_progress=False)
    retriever = bm25s.BM25(k1=params.k1, b=params.b, method=params.method)
    retriever.index(corpus_tokens, show_progress=False)
    vocab = {token_id: token for token, token_id in corpus_tokens.vocab.items()}
    expected = []
    for query in QUERIES:
        tokens = bm25s.tokenize([query], stopwords=params.stopwords, stemmer=stemmer, return_ids=False,
                                show_progress=False)[0]
        known = [token for token in tokens if token in vocab.values()]
        scores = retriever.get_scores(known) if known else np.zeros(len(CORPUS))
        ranked = sorted((-float(score), position) for position, score in enumerate(scores) if score > 0)
        expected.append([(position, -negated) for negated, position in ranked][:depth])
    return expected


@pytest.mark.parametrize("params", [BM25Params(), BM25Params(k1=0.9, b=0.4, method="robertson", stemmer=None),
                                    BM25Params(k1=1.2, b=1.0, method="atire", stopwords=None)])
@pytest.mark.parametrize("depth", [1, 3, 100])
def test_hits_are_bm25s_own_scores_best_first(params, depth):
    hits = bm25_retrieve(CORPUS, QUERIES, depth=depth, params=params)
    for found, scores, expected in zip(hits.indices, hits.scores, _reference(params, depth), strict=True):
        assert found.dtype == np.int64 and scores.dtype == np.float64
        assert found.tolist() == [position for position, _ in expected]
        np.testing.assert_allclose(scores, [score for _, score in expected], rtol=1e-6)
        assert np.all(np.diff(scores) <= 0)


def test_a_lucene_score_computed_by_hand():
    corpus = ["apple banana", "apple apple cherry", "cherry durian"]
    hits = bm25_retrieve(corpus, ["apple"], depth=10, params=BM25Params(stopwords=None, stemmer=None))
    k1, b, avgdl = 1.5, 0.75, (2 + 3 + 2) / 3
    idf = log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # N = 3 passages, "apple" in 2 of them
    first = idf * 1 / (1 + k1 * (1 - b + b * 2 / avgdl))  # once in a 2-token passage
    second = idf * 2 / (2 + k1 * (1 - b + b * 3 / avgdl))  # twice in a 3-token passage
    assert hits.indices[0].tolist() == [1, 0]  # "cherry durian" scores 0: no hit, as in Lucene
    assert hits.scores[0] == pytest.approx([second, first], rel=1e-12)


def test_stemming_and_stopwords_decide_what_matches():
    corpus = ["The floods rose", "A flood is coming", "Nothing here"]
    stemmed = bm25_retrieve(corpus, ["flooding", "the"], depth=5)
    assert sorted(stemmed.indices[0].tolist()) == [0, 1]  # flooding, floods, flood share the stem flood
    assert stemmed.indices[1].tolist() == []  # only a stopword: no terms, no hits
    plain = bm25_retrieve(corpus, ["flooding", "the"], depth=5, params=BM25Params(stopwords=None, stemmer=None))
    assert plain.indices[0].tolist() == [] and plain.indices[1].tolist() == [0]


def test_empty_corpus_and_tokenless_inputs_give_no_hits():
    for corpus in ([], ["", "a ! ?"]):
        hits = bm25_retrieve(corpus, ["flood", ""], depth=3)
        assert [found.tolist() for found in hits.indices] == [[], []]
        assert [scores.tolist() for scores in hits.scores] == [[], []]
    assert bm25_retrieve(CORPUS, [], depth=3).indices == []
    with pytest.raises(ValueError):
        bm25_retrieve(CORPUS, QUERIES, depth=0)


def test_queries_are_retrieved_in_batches_with_progress(monkeypatch):
    monkeypatch.setattr(bm25, "QUERY_BATCH", 2)
    calls = []
    batched = bm25_retrieve(CORPUS, QUERIES, depth=4, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2, 5), (4, 5), (5, 5)]
    whole = bm25_retrieve(CORPUS, QUERIES, depth=4)
    assert [f.tolist() for f in batched.indices] == [f.tolist() for f in whole.indices]

    def cancel(done, total):
        raise InterruptedError

    with pytest.raises(InterruptedError):
        bm25_retrieve(CORPUS, QUERIES, depth=4, progress=cancel)


def test_params_record_what_decides_the_scores():
    recorded = BM25Params(k1=1.2, b=0.5, stemmer=None).recorded()
    assert recorded == {
        "k1": 1.2, "b": 0.5, "method": "lucene",
        "tokenizer": {"lowercase": True, "token_pattern": r"(?u)\b\w\w+\b", "stopwords": "en", "stemmer": None,
                      "stemmer_library": None},
        "library": "bm25s", "library_version": version("bm25s"),
    }
    assert BM25Params().recorded()["tokenizer"]["stemmer_library"] == f"PyStemmer {version('PyStemmer')}"


@pytest.mark.parametrize("bad", [{"method": "bm26"}, {"b": 1.5}, {"k1": -1}, {"stemmer": "klingon"},
                                 {"stopwords": "klingon"}])
def test_bad_params_are_refused(bad):
    with pytest.raises(ValueError):
        BM25Params(**bad)
