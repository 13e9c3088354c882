"""The BM25 -> dense cascade against a brute-force cosine over all passages, restricted here to BM25's top N."""
import numpy as np
import pytest

from models_llm.retrieval import Hits, bm25_retrieve, cascade_rerank

CORPUS = [
    "River flood warning for the valley towns.",
    "Flood barriers held along the river.",
    "The wildfire spread towards the valley.",
    "Evacuation after the flood in the river valley.",
    "Stock markets closed higher.",
    "Flood insurance claims rose after the storm.",
    "Valley residents cleaned up after the flood.",
    "Wildfire crews and flood crews worked together.",
]
QUERIES = ["flood river valley", "wildfire", "earnings report"]


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.mark.parametrize(("first_depth", "keep"), [(5, 3), (5, 10), (2, 1), (8, 8)])
def test_cascade_is_the_cosine_ranking_of_bm25s_top_n(first_depth, keep):
    rng = np.random.default_rng(5)
    passages = _unit(rng.normal(size=(len(CORPUS), 12))).astype(np.float32)
    passages[6] = passages[1]  # equal cosines for two flood passages: BM25's order must decide
    queries = _unit(rng.normal(size=(len(QUERIES), 12))).astype(np.float32)
    first = bm25_retrieve(CORPUS, QUERIES, depth=first_depth)
    result = cascade_rerank(first, passages, queries, keep=keep)
    all_cosines = queries.astype(np.float64) @ passages.astype(np.float64).T  # every passage
    for q, (found, scores) in enumerate(zip(result.indices, result.scores, strict=True)):
        candidates = first.indices[q].tolist()
        assert len(candidates) <= first_depth
        bm25_rank = {position: rank for rank, position in enumerate(candidates)}
        expected = sorted(candidates, key=lambda p: (-all_cosines[q, p], bm25_rank[p]))[:keep]
        assert found.tolist() == expected
        np.testing.assert_allclose(scores, all_cosines[q, expected], atol=1e-6)
    assert result.indices[2].tolist() == []  # no BM25 hit, nothing to re-rank


def test_ties_keep_the_first_stage_order_and_bad_arguments_are_refused():
    passages = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    first = Hits(indices=[np.array([2, 1, 0])], scores=[np.array([3.0, 2.0, 1.0])])
    result = cascade_rerank(first, passages, np.array([[1.0, 0.0]]), keep=2)
    assert result.indices[0].tolist() == [2, 0] and result.scores[0].tolist() == [1.0, 1.0]
    with pytest.raises(ValueError):
        cascade_rerank(first, passages, np.array([[1.0, 0.0]]), keep=0)
    with pytest.raises(ValueError):
        cascade_rerank(first, passages, np.zeros((2, 2)), keep=1)
