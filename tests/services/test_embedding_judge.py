"""The embedding judge on a scoring job, as a worker runs it: each distinct query and passage text is embedded once
for the whole job, the dense retriever's stored passage embeddings are reused when the judge's model made them from
the same text (and ignored otherwise), and every P equals the cosine of the pair embedded on its own by
sentence-transformers (the old per-pair path)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from labeling import llm_adapter
from labeling.models import Judgment, Pair
from labeling.services.retrieval_embeddings import passage_embeddings
from labeling.services.scoring import scoring_chunk_run, scoring_job_create
from models_llm.bundled import minilm_folder
from models_llm.retrieval.dense import DenseEncoder, passage_text, query_text
from tests.scoring_fixtures import minilm_judge, small_scoring_project

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def reference():
    """sentence-transformers itself, one pair at a time: the old per-pair path."""
    model = SentenceTransformer(str(minilm_folder()), device="cpu", local_files_only=True)

    def p_of(query: str, passage: str) -> float:
        a, b = model.encode([query, passage], normalize_embeddings=True).astype(np.float64)
        return (float(a @ b) + 1.0) / 2.0

    return p_of


class StoredAs:
    """An encoder for passage_embeddings that stores the given vectors under the given model name."""

    def __init__(self, name: str, vectors: np.ndarray) -> None:
        self.name, self.dimension, self.vectors = name, vectors.shape[1], vectors

    def encode(self, texts, *, progress=None):
        return self.vectors[:len(texts)]


@pytest.fixture
def scored(monkeypatch, settings):
    """Runs every chunk of a new minilm job on a freshly loaded scorer (none kept from another test) and returns
    the texts each call of its encoder embedded."""
    monkeypatch.setattr(llm_adapter, "_scorers", {})
    settings.SCORING_WRITE_PAIRS = 3  # several parts per chunk: several calls of the scorer

    def run(project) -> list[list[str]]:
        judge = minilm_judge(project)
        scorer = llm_adapter.scorer_for(judge)
        calls: list[list[str]] = []
        encode = scorer.encoder.encode
        monkeypatch.setattr(scorer.encoder, "encode", lambda texts, **kw: calls.append(list(texts)) or encode(texts))
        job = scoring_job_create(project=project, judge=judge, chunk_pairs=7)
        assert sum(scoring_chunk_run(chunk_id=c) for c in job.chunks.values_list("id", flat=True)) == job.total
        return calls

    return run


def texts_of(project) -> tuple[list[str], list[tuple[int, str]]]:
    """The embedded query texts and (passage id, embedded passage text) of the project."""
    pairs = Pair.objects.filter(project=project).select_related("query", "passage")
    queries = {query_text(p.query.text, p.query.definitions.get().text, True) for p in pairs}
    passages = {(p.passage_id, passage_text(p.passage.title, p.passage.text)) for p in pairs}
    return sorted(queries), sorted(passages)


def judged(project) -> dict[tuple[str, str], float]:
    """(embedded query text, embedded passage text) -> the stored P, for every pair."""
    return {(query_text(j.pair.query.text, j.definition.text, True),
             passage_text(j.pair.passage.title, j.pair.passage.text)): j.p_relevant
            for j in Judgment.objects.filter(pair__project=project).select_related("pair__query", "pair__passage",
                                                                                   "definition")}


def test_a_job_embeds_each_distinct_text_once_and_scores_as_the_per_pair_path(tmp_path, scored, reference):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=8)
    calls = scored(project)
    queries, passages = texts_of(project)
    # 16 pairs in chunks of 7 and parts of 3: 8 calls of the scorer, yet each text embedded once in all.
    embedded = Counter(text for call in calls for text in call)
    assert sorted(embedded) == sorted(queries + [text for _, text in passages])
    assert set(embedded.values()) == {1}
    p = judged(project)
    assert len(p) == 16
    for (query, passage), value in p.items():
        assert value == pytest.approx(reference(query, passage), abs=1e-6)


def test_the_retrievers_stored_passage_embeddings_are_reused_when_the_judge_s_model_made_them(
        tmp_path, scored, reference):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=6)
    queries, passages = texts_of(project)
    # What a dense run on the bundled MiniLM stores: every passage, except one whose text has changed since.
    changed_id, changed_text = passages[0]
    stored = [(changed_id, "an older text of this passage")] + passages[1:]
    passage_embeddings(project=project, encoder=DenseEncoder(minilm_folder()), passages=stored)
    calls = scored(project)
    assert sorted(text for call in calls for text in call) == sorted([*queries, changed_text])
    for (query, passage), value in judged(project).items():
        assert value == pytest.approx(reference(query, passage), abs=1e-6)


def test_stored_embeddings_of_another_model_are_ignored(tmp_path, scored, reference):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=4)
    queries, passages = texts_of(project)
    # Vectors no model would give, under another model's name: were they read, every P would be (0 + 1) / 2.
    garbage = np.zeros((len(passages), 384), np.float32)
    garbage[:, 0] = 1.0
    passage_embeddings(project=project, encoder=StoredAs("other-model-0123456789abcdef", garbage), passages=passages)
    calls = scored(project)
    assert sorted(text for call in calls for text in call) == sorted(queries + [text for _, text in passages])
    for (query, passage), value in judged(project).items():
        assert value == pytest.approx(reference(query, passage), abs=1e-6)


def test_stored_vectors_under_the_judge_s_model_are_what_it_scores_with(tmp_path, scored):
    """The reuse is real: vectors stored under MiniLM's name (here made up) are the ones the cosine is taken with."""
    project = small_scoring_project(tmp_path / "b", queries=1, passages=4)
    _, passages = texts_of(project)
    made_up = np.eye(len(passages), 384, dtype=np.float32)
    passage_embeddings(project=project, encoder=StoredAs(DenseEncoder(minilm_folder()).name, made_up),
                       passages=passages)
    calls = scored(project)
    (query,) = texts_of(project)[0]
    assert calls == [[query]]
    query_vector = DenseEncoder(minilm_folder()).encode([query])[0].astype(np.float64)
    p = judged(project)
    for row, (_, text) in enumerate(passages):
        assert p[(query, text)] == pytest.approx((query_vector[row] + 1.0) / 2.0, abs=1e-6)
