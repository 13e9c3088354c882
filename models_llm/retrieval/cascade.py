"""The cascade of the crisis-retrieval paper: BM25's top N per query re-ranked by dense cosine, the best M kept.
The first stage decides which passages can appear at all; the second only reorders and cuts them."""
from __future__ import annotations

import numpy as np

from models_llm.retrieval.hits import Hits, keep_best


def cascade_rerank(first: Hits, passages: np.ndarray, queries: np.ndarray, *, keep: int) -> Hits:
    """`first`'s hits re-scored by the cosine of their unit vectors (`passages` and `queries` indexed by corpus
    and query position), best first, at most `keep` per query; equal cosines keep the first stage's order."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    if len(first.indices) != len(queries):
        raise ValueError(f"{len(first.indices)} first-stage queries but {len(queries)} query vectors")
    indices, scores = [], []
    for found, query in zip(first.indices, queries):
        kept, cosine = keep_best(found, np.asarray(passages[found], np.float64) @ np.asarray(query, np.float64), keep)
        indices.append(kept)
        scores.append(cosine)
    return Hits(indices=indices, scores=scores)
