"""Dense search against a brute-force numpy cosine computed here, and the encoder against a mean-pooled plain
transformers computation on the bundled all-MiniLM-L6-v2."""
import numpy as np
import pytest

from models_llm.backends.embedding import query_text as judge_query_text
from models_llm.bundled import minilm_folder
from models_llm.retrieval import DenseEncoder, dense, dense_search, query_text
from models_llm.types import PairInput


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _brute_force(passages: np.ndarray, queries: np.ndarray, depth: int) -> list[tuple[list[int], np.ndarray]]:
    """Cosines in float64 over every passage, sorted by cosine and then by position."""
    cosines = _unit(queries.astype(np.float64)) @ _unit(passages.astype(np.float64)).T
    ranked = []
    for row in cosines:
        order = np.lexsort((np.arange(len(row)), -row))[:depth]
        ranked.append((order.tolist(), row[order]))
    return ranked


@pytest.mark.parametrize("depth", [1, 7, 40, 500])
def test_exact_search_equals_brute_force_cosine_ties_by_position(depth):
    rng = np.random.default_rng(3)
    passages = _unit(rng.normal(size=(60, 16))).astype(np.float32)
    passages[[10, 25, 41]] = passages[4]  # four identical passages: exact ties
    passages[[33, 50]] = passages[7]
    queries = np.vstack([passages[4], passages[7], _unit(rng.normal(size=(8, 16)))]).astype(np.float32)
    hits = dense_search(passages, queries, depth=depth, approximate=False)
    for found, scores, (expected, cosines) in zip(hits.indices, hits.scores, _brute_force(passages, queries, depth),
                                                  strict=True):
        assert found.dtype == np.int64 and scores.dtype == np.float64
        assert found.tolist() == expected
        np.testing.assert_allclose(scores, cosines, atol=1e-6)
    # The tie group cut by the depth keeps its lowest positions.
    assert hits.indices[0].tolist()[:4] == [4, 10, 25, 41][:depth]


def test_approximate_search_finds_the_nearest_passages():
    rng = np.random.default_rng(11)
    passages = _unit(rng.normal(size=(3000, 32))).astype(np.float32)
    queries = _unit(rng.normal(size=(200, 32))).astype(np.float32)
    hits = dense_search(passages, queries, depth=10, approximate=True)
    truth = _brute_force(passages, queries, 10)
    recall = np.mean([len(set(found.tolist()) & set(expected)) / 10
                      for found, (expected, _) in zip(hits.indices, truth, strict=True)])
    assert recall >= 0.95
    for found, scores, query in zip(hits.indices, hits.scores, queries, strict=True):
        assert len(found) == 10 and np.all(np.diff(scores) <= 0)
        np.testing.assert_allclose(scores, passages[found].astype(np.float64) @ query.astype(np.float64), atol=1e-6)
    deeper = dense_search(passages[:50], queries[:3], depth=80, approximate=True)  # depth beyond the corpus
    assert [sorted(found.tolist()) for found in deeper.indices] == [list(range(50))] * 3


def test_empty_inputs_and_bad_shapes():
    assert dense_search(np.zeros((0, 8), np.float32), np.ones((2, 8)), depth=3).indices[1].tolist() == []
    assert dense_search(np.ones((4, 8)), np.zeros((0, 8)), depth=3).indices == []
    with pytest.raises(ValueError):
        dense_search(np.ones((4, 8)), np.ones((2, 5)), depth=3)
    with pytest.raises(ValueError):
        dense_search(np.ones((4, 8)), np.ones((2, 8)), depth=0)


def test_progress_is_reported_per_block_and_can_cancel(monkeypatch):
    monkeypatch.setattr(dense, "EXACT_BLOCK_SCORES", 40)  # 20 passages: 2 queries a block
    passages, queries = np.eye(20, dtype=np.float32), np.eye(20, dtype=np.float32)[:5]
    calls = []
    dense_search(passages, queries, depth=2, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(2, 5), (4, 5), (5, 5)]

    def cancel(done, total):
        raise InterruptedError

    with pytest.raises(InterruptedError):
        dense_search(passages, queries, depth=2, progress=cancel)


def test_query_text_is_the_embedding_judges_rule():
    question, definition = "  Which dams failed?  ", " Reports of dam breaches. "
    assert query_text(question, definition, use_definition=True) == "Which dams failed?\nReports of dam breaches."
    assert query_text(question, definition, use_definition=False) == "Which dams failed?"
    assert query_text(question, "   ", use_definition=True) == query_text(question, None, use_definition=True)
    pair = PairInput(pair_id=1, query=question, passage="p", definition=definition)
    for use in (True, False):
        assert judge_query_text(pair, use) == query_text(question, definition, use)


TEXTS = ["Flood waters reached the town hall.", "a cat", "Evacuation routes are closed after the earthquake.",
         "Quarterly revenue rose.", "Wildfire smoke covers the valley; residents should stay inside."]


@pytest.fixture(scope="module")
def encoder():
    return DenseEncoder(minilm_folder(), batch_size=1)


def test_encoder_gives_mean_pooled_unit_vectors_as_by_hand(encoder):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(minilm_folder()), AutoModel.from_pretrained(minilm_folder())
    reference = []
    for text in TEXTS:  # one text at a time, no padding: the plain mean of its token vectors, unit length
        with torch.no_grad():
            tokens = model(**tokenizer(text, truncation=True, max_length=256, return_tensors="pt")).last_hidden_state
        mean = tokens[0].numpy().astype(np.float64).mean(axis=0)
        reference.append(mean / np.linalg.norm(mean))
    vectors = encoder.encode(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (len(TEXTS), encoder.dimension) == (5, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(vectors, np.array(reference), atol=1e-5)
    assert encoder.encode([]).shape == (0, 384)


def test_encoder_reports_progress_per_chunk_and_has_a_stable_name(encoder):
    calls = []
    texts = [f"passage number {i}" for i in range(20)]  # chunks of 16 batches of one text
    vectors = encoder.encode(texts, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(16, 20), (20, 20)] and vectors.shape == (20, 384)
    again = DenseEncoder(minilm_folder())
    assert again.name == encoder.name and encoder.name.startswith(minilm_folder().name + "-")
