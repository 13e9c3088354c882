"""Re-ranking by a judge's P: each query's first-stage hits ordered by a score table known here, equal P in the first
stage's order, `keep` kept; the pairs scored in batches of at most batch_size, with progress after each."""
import numpy as np
import pytest

from models_llm.retrieval import Hits, judge_rerank

# P of (query, corpus position): ties within query 0 (positions 3 and 1; 7 and 5) that the first order decides.
P = np.array([[0.1, 0.5, 0.2, 0.5, 0.9, 0.3, 0.0, 0.3],
              [0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4, 0.4],
              [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
FIRST = Hits(indices=[np.array([3, 5, 1, 7, 4, 0]), np.array([2, 6]), np.array([], np.int64)],
             scores=[np.arange(6, 0, -1.0), np.array([2.0, 1.0]), np.array([])])


@pytest.mark.parametrize(("keep", "batch_size"), [(3, 1), (4, 5), (10, 100)])
def test_each_query_keeps_its_best_p_with_ties_in_the_first_order(keep, batch_size):
    batches, reports = [], []

    def score(pairs):
        batches.append(len(pairs))
        return [P[query, position] for query, position in pairs]

    result = judge_rerank(FIRST, score, keep=keep, batch_size=batch_size,
                          progress=lambda done, total: reports.append((done, total)))
    expected = [[4, 3, 1, 5, 7, 0], [2, 6], []]
    for q, found in enumerate(result.indices):
        assert found.tolist() == expected[q][:keep]
        np.testing.assert_array_equal(result.scores[q], P[q, expected[q][:keep]])
    assert sum(batches) == 8 and max(batches) <= batch_size
    assert reports[-1] == (8, 8) and len(reports) == len(batches)


def test_a_scorer_that_answers_too_few_scores_is_refused():
    with pytest.raises(ValueError, match="8 pairs scored but 7 scores"):
        judge_rerank(FIRST, lambda pairs: [0.5] * (len(pairs) - 1), keep=2, batch_size=8)
