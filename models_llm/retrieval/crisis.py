"""The crisis paper's double cascade (Multi-Stage Crisis Retriever, section 3.8): its cut-offs and its filtered
corpus. Per query: BM25's top N, re-ranked by a cross-encoder, the best M kept; the kept passages of all queries,
duplicates removed, are the filtered corpus F; dense retrieval over F ranks its top min(D, floor(f_d * |F|)), a
cross-encoder re-ranks them and keeps the best ceil(f_k * that) per query. The stages themselves are bm25_retrieve,
judge_rerank and dense_search; this module decides only the sizes and the corpus between them."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from models_llm.retrieval.hits import Hits

PRESET = "crisis-double-cascade"


@dataclass(frozen=True)
class CrisisCutoffs:
    """The cut-offs, the paper's values by default: BM25 depth 200, 60 kept after the first re-ranking, dense depth
    200 or 10 % of the filtered corpus when that is smaller, 10 % kept after the final re-ranking."""

    lexical_depth: int = 200
    lexical_keep: int = 60
    dense_depth: int = 200
    dense_fraction: float = 0.1
    final_fraction: float = 0.1

    def __post_init__(self) -> None:
        if not 1 <= self.lexical_keep <= self.lexical_depth:
            raise ValueError(f"the double cascade needs 1 <= lexical keep <= lexical depth, got keep "
                             f"{self.lexical_keep} and depth {self.lexical_depth}")
        if self.dense_depth < 1:
            raise ValueError(f"the dense depth must be at least 1, got {self.dense_depth}")
        for name in ("dense_fraction", "final_fraction"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value <= 1):
                raise ValueError(f"{name.replace('_', ' ')} must be above 0 and at most 1, got {value!r}")

    def dense_cut(self, filtered: int) -> int:
        """How many passages of the filtered corpus (`filtered` of them) dense retrieval ranks per query: the dense
        depth, or the dense fraction of the filtered corpus when that is smaller (floored, as the released code's
        int(); at least 1 while the filtered corpus is not empty)."""
        if filtered < 1:
            return 0
        return max(1, min(self.dense_depth, math.floor(self.dense_fraction * filtered + 1e-9)))

    def final_keep(self, ranked: int) -> int:
        """How many of a query's `ranked` dense hits the final re-ranking keeps: the final fraction of them, rounded
        up (the top 10 % of 3 is 1 passage, not none)."""
        if ranked < 1:
            return 0
        return min(ranked, max(1, math.ceil(self.final_fraction * ranked - 1e-9)))


def filtered_corpus(kept: Hits) -> np.ndarray:
    """The corpus positions kept for any query (the first stage's output), each once, in corpus order."""
    return np.unique(np.concatenate([np.zeros(0, np.int64), *[np.asarray(i, np.int64) for i in kept.indices]]))
