"""BM25 runs with bm25s (Lucene's BM25 by default): the sparse first stage, and the baseline every pooled
test collection is expected to contain.

Only passages with a score above 0 are hits: a BM25 score of 0 means no query term occurs in the passage,
and Lucene (Anserini, Pyserini) returns nothing for those either, so a run never pads itself with passages
in corpus order."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version

import bm25s
import numpy as np
import Stemmer

from models_llm.retrieval.hits import Hits, ProgressFn, check_depth, no_hits, top_positions

# bm25s' (and scikit-learn's) default pattern, passed explicitly so that what a run records stays true
# whatever a later bm25s makes its default.
TOKEN_PATTERN = r"(?u)\b\w\w+\b"
METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
# Queries scored between two progress calls; each holds one score per passage, so this bounds memory too.
QUERY_BATCH = 256


@dataclass(frozen=True)
class BM25Params:
    """BM25's parameters and the tokenizer's (stopword list name as bm25s knows it, Snowball stemmer name as
    PyStemmer knows it; None: no stopword removal / no stemming). The defaults are bm25s' and Lucene's."""

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stopwords: str | None = "en"
    stemmer: str | None = "english"

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"unknown BM25 method {self.method!r}; one of {', '.join(METHODS)}")
        if self.k1 < 0 or not 0 <= self.b <= 1:
            raise ValueError(f"BM25 needs k1 >= 0 and 0 <= b <= 1, got k1={self.k1}, b={self.b}")
        if self.stemmer is not None and self.stemmer not in Stemmer.algorithms():
            raise ValueError(f"unknown stemmer {self.stemmer!r}; PyStemmer has {', '.join(Stemmer.algorithms())}")
        try:
            bm25s.tokenize([], stopwords=self.stopwords, show_progress=False)  # looks the list up by name
        except ValueError:
            raise ValueError(f"bm25s has no stopword list {self.stopwords!r}") from None

    def recorded(self) -> dict:
        """Everything that decides a run's scores, to be stored with the run."""
        return {
            "k1": self.k1,
            "b": self.b,
            "method": self.method,
            "tokenizer": {
                "lowercase": True,
                "token_pattern": TOKEN_PATTERN,
                "stopwords": self.stopwords,
                "stemmer": self.stemmer,
                "stemmer_library": f"PyStemmer {version('PyStemmer')}" if self.stemmer else None,
            },
            "library": "bm25s",
            "library_version": version("bm25s"),
        }


def _tokenize(texts: Sequence[str], params: BM25Params) -> list[list[str]]:
    stemmer = Stemmer.Stemmer(params.stemmer) if params.stemmer else None
    return bm25s.tokenize(list(texts), lower=True, token_pattern=TOKEN_PATTERN, stopwords=params.stopwords,
                          stemmer=stemmer, return_ids=False, show_progress=False)


def bm25_retrieve(corpus: Sequence[str], queries: Sequence[str], *, depth: int, params: BM25Params = BM25Params(),
                  progress: ProgressFn | None = None) -> Hits:
    """The `depth` best passages of `corpus` per query (fewer when fewer passages share a term with it)."""
    check_depth(depth)
    corpus_tokens = _tokenize(corpus, params)
    if not any(corpus_tokens):
        return no_hits(len(queries))  # bm25s cannot index a corpus without a single token
    # float64 scores: the run records them, and float32 would merge near-ties into arbitrary-looking ties.
    retriever = bm25s.BM25(k1=params.k1, b=params.b, method=params.method, dtype="float64")
    retriever.index(corpus_tokens, show_progress=False)
    indices, scores = [], []
    for start in range(0, len(queries), QUERY_BATCH):
        for tokens in _tokenize(queries[start:start + QUERY_BATCH], params):
            # Terms absent from the corpus are dropped: they match nothing, as in Lucene.
            ids = retriever.get_tokens_ids(tokens)
            row = retriever.get_scores_from_ids(ids) if ids else np.zeros(0)
            matched = np.flatnonzero(row > 0)
            best = matched[top_positions(row[matched], depth)]
            indices.append(best)
            scores.append(row[best].astype(np.float64))
        if progress is not None:
            progress(len(indices), len(queries))
    return Hits(indices=indices, scores=scores)
