"""A re-ranking stage by a judge's P: the previous stage's hits scored pair by pair in batches (a cross-encoder,
an embedding or an LLM judge reading query and passage), each query's best `keep` by P kept. Like the cascade's
dense stage, it only reorders and cuts what the stage before it found."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from models_llm.retrieval.hits import Hits, ProgressFn, keep_best

# (query position, corpus position) pairs -> one P per pair, in order.
ScorePairs = Callable[[Sequence[tuple[int, int]]], Sequence[float]]


def judge_rerank(first: Hits, score: ScorePairs, *, keep: int, batch_size: int,
                 progress: ProgressFn | None = None) -> Hits:
    """`first`'s hits re-scored by `score`, called on at most `batch_size` pairs at a time (`progress` after
    each batch, which may raise to stop), best P first, at most `keep` per query; equal P keep `first`'s order."""
    if keep < 1:
        raise ValueError(f"keep must be at least 1, got {keep}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    pairs = [(query, int(position)) for query, found in enumerate(first.indices) for position in found]
    p = np.zeros(len(pairs), np.float64)
    for start in range(0, len(pairs), batch_size):
        batch = pairs[start:start + batch_size]
        values = np.asarray(score(batch), np.float64)
        if values.shape != (len(batch),):
            raise ValueError(f"{len(batch)} pairs scored but {values.size} scores returned")
        p[start:start + len(batch)] = values
        if progress is not None:
            progress(start + len(batch), len(pairs))
    indices, scores, start = [], [], 0
    for found in first.indices:
        kept, values = keep_best(found, p[start:start + len(found)], keep)
        indices.append(kept)
        scores.append(values)
        start += len(found)
    return Hits(indices=indices, scores=scores)
