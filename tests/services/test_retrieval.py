"""Retrieval jobs on a small ClimRetrieve project: each retriever's run equals its reference (bm25_retrieve called
directly; brute-force cosines of sentence-transformers' own MiniLM vectors), a second dense run embeds no passage,
a cancelled or failed job writes no run, names are never taken twice, and a real worker runs a queued job."""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from labeling.models import RetrievalJob, Run, RunEntry
from labeling.services import retrieval as retrieval_module
from labeling.services.retrieval import (
    RetrievalError,
    retrieval_cancel,
    retrieval_create,
    retrieval_fail,
    retrieval_request,
    retrieval_run,
)
from labeling.tasks import retrieval_task
from models_llm.bundled import minilm_folder
from models_llm.retrieval.bm25 import BM25Params, bm25_retrieve
from models_llm.retrieval.dense import DenseEncoder
from tests.polling import wait_for
from tests.scoring_fixtures import SAMPLE, small_scoring_project

pytestmark = pytest.mark.django_db

QUERIES, PASSAGES = 3, 20


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=QUERIES, passages=PASSAGES)


@pytest.fixture(scope="module")
def sample():
    """The sample's questions, definitions (cut as the project's are) and passage texts (title line, then text)."""
    queries = [json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text().splitlines()[:QUERIES]]
    corpus = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()[:PASSAGES]]
    return {
        "query_ids": [q["_id"] for q in queries],
        "questions": [q["text"] for q in queries],
        "with_definitions": [f"{q['text']}\n{q['definition'][:300].strip()}" for q in queries],
        "passage_ids": [d["_id"] for d in corpus],
        "passages": [f"{d['title']}\n{d['text'][:400]}" if d.get("title") else d["text"][:400] for d in corpus],
    }


@pytest.fixture(scope="module")
def cosines(sample):
    """Brute-force cosines (query x passage) of sentence-transformers' own unit MiniLM vectors."""
    model = SentenceTransformer(str(minilm_folder()), device="cpu", local_files_only=True)
    queries = model.encode(sample["questions"], normalize_embeddings=True)
    return queries @ model.encode(sample["passages"], normalize_embeddings=True).T


def rankings(run: Run) -> dict[str, list[tuple[str, float]]]:
    """query external id -> (passage external id, score) by rank, as stored."""
    found = defaultdict(list)
    entries = RunEntry.objects.filter(run=run).order_by("query_id", "rank")
    for query, passage, rank, score in entries.values_list("query__external_id", "passage__external_id", "rank",
                                                           "score"):
        assert rank == len(found[query]) + 1
        found[query].append((passage, score))
    return dict(found)


def expected(sample, ids: list[np.ndarray], scores: list[np.ndarray]) -> dict[str, list[tuple[str, float]]]:
    """The reference's rankings, equal scores in trec_eval's order (passage id descending) as a run stores them."""
    ranked = {}
    for query, found, values in zip(sample["query_ids"], ids, scores):
        entries = sorted(((sample["passage_ids"][i], float(s)) for i, s in zip(found, values)), reverse=True)
        ranked[query] = sorted(entries, key=lambda entry: -entry[1])
    return ranked


def assert_same(run: Run, reference: dict[str, list[tuple[str, float]]], tolerance: float = 1e-9) -> None:
    stored = rankings(run)
    assert list(stored) == list(reference)
    for query, ranked in reference.items():
        assert [p for p, _ in stored[query]] == [p for p, _ in ranked], query
        np.testing.assert_allclose([s for _, s in stored[query]], [s for _, s in ranked], atol=tolerance)


def test_a_bm25_job_writes_the_run_bm25_retrieve_ranks(project, sample):
    job = retrieval_request(project=project, retriever="bm25", name="bm25", depth=5, k1=1.2)
    assert (job.status, job.parameters) == ("pending", {"use_definition": False, "depth": 5, "k1": 1.2})
    done = retrieval_run(job_id=job.id)
    assert (done.status, done.attempts, done.error) == ("done", 1, "")
    assert done.done == done.total == QUERIES and done.progress == 1.0
    run = done.run
    assert (run.name, run.kind, run.queries, run.depth) == ("bm25", "bm25", QUERIES, 5)
    params = BM25Params(k1=1.2)
    hits = bm25_retrieve(sample["passages"], sample["questions"], depth=5, params=params)
    assert_same(run, expected(sample, hits.indices, hits.scores))
    assert run.parameters["bm25"] == params.recorded() and run.parameters["query_text"] == "question"

    again = retrieval_run(job_id=job.id)
    assert (again.attempts, Run.objects.count(), RunEntry.objects.count()) == (1, 1, run.entries)


def test_the_definition_joins_the_question_when_asked(project, sample):
    run = retrieval_run(job_id=retrieval_request(project=project, retriever="bm25", name="bm25+def", depth=8,
                                                 use_definition=True).id).run
    hits = bm25_retrieve(sample["passages"], sample["with_definitions"], depth=8)
    assert_same(run, expected(sample, hits.indices, hits.scores))
    assert run.parameters["definition_versions"] == {query: 1 for query in sample["query_ids"]}


def test_a_dense_job_ranks_by_the_cosines_of_minilm_vectors_and_a_second_embeds_no_passage(
    project, sample, cosines, monkeypatch,
):
    encoded = []
    encode = DenseEncoder.encode
    monkeypatch.setattr(DenseEncoder, "encode", lambda self, texts, **kw: encoded.append(len(texts)) or
                        encode(self, texts, **kw))
    run = retrieval_run(job_id=retrieval_request(project=project, retriever="dense", name="dense", depth=7).id).run
    order = [np.argsort(-row, kind="stable")[:7] for row in cosines]
    assert_same(run, expected(sample, order, [row[best] for row, best in zip(cosines, order)]), tolerance=1e-5)
    assert run.parameters["encoder"]["search"] == {"method": "exact"}
    assert encoded == [PASSAGES, QUERIES]

    encoded.clear()
    second = retrieval_run(job_id=retrieval_request(project=project, retriever="dense", name="dense 2", depth=7).id)
    assert encoded == [QUERIES] and rankings(second.run) == rankings(run)


def test_a_large_corpus_is_searched_by_hnsw_and_recorded_so(project, sample, cosines, monkeypatch):
    monkeypatch.setattr(retrieval_module, "HNSW_MIN_PASSAGES", PASSAGES)
    run = retrieval_run(job_id=retrieval_request(project=project, retriever="dense", name="hnsw", depth=7).id).run
    order = [np.argsort(-row, kind="stable")[:7] for row in cosines]
    assert_same(run, expected(sample, order, [row[best] for row, best in zip(cosines, order)]), tolerance=1e-5)
    assert run.parameters["encoder"]["search"]["method"] == "hnsw"


def test_a_cascade_reranks_bm25s_candidates_by_cosine(project, sample, cosines):
    job = retrieval_request(project=project, retriever="cascade", name="cascade", first_depth=10, keep=4)
    run = retrieval_run(job_id=job.id).run
    first = bm25_retrieve(sample["passages"], sample["questions"], depth=10)
    order, scores = [], []
    for row, candidates in zip(cosines, first.indices):
        best = candidates[np.argsort(-row[candidates], kind="stable")[:4]]
        order.append(best)
        scores.append(row[best])
    assert_same(run, expected(sample, order, scores), tolerance=1e-5)
    assert (run.kind, run.depth, run.parameters["first_depth"], run.parameters["keep"]) == ("cascade", 4, 10, 4)


def test_a_job_cancelled_while_it_runs_stops_and_writes_no_run(project, monkeypatch):
    job = retrieval_request(project=project, retriever="bm25", name="stopped")
    monkeypatch.setattr(retrieval_module, "PROGRESS_SECONDS", 0)

    def cancelled_midway(corpus, queries, *, depth, params, progress):
        progress(1, len(queries))
        assert RetrievalJob.objects.get(id=job.id).done == 1
        retrieval_cancel(job=job)
        progress(2, len(queries))
        raise AssertionError("the job went on after it was cancelled")

    monkeypatch.setattr(retrieval_module, "bm25_retrieve", cancelled_midway)
    stopped = retrieval_run(job_id=job.id)
    assert (stopped.status, stopped.run, Run.objects.count()) == ("cancelled", None, 0)
    assert stopped.finished_at is not None


def test_a_pending_job_cancelled_is_never_run_and_a_finished_one_stays(project):
    pending = retrieval_request(project=project, retriever="bm25", name="never")
    assert retrieval_cancel(job=pending).status == "cancelled"
    assert (retrieval_run(job_id=pending.id).attempts, Run.objects.count()) == (0, 0)
    done = retrieval_run(job_id=retrieval_request(project=project, retriever="bm25", name="kept").id)
    assert retrieval_cancel(job=done).status == "done" and Run.objects.filter(name="kept").exists()


def test_fail_records_the_error_and_a_finished_job_keeps_what_it_has(project):
    job = retrieval_request(project=project, retriever="bm25", name="failing")
    failed = retrieval_fail(job_id=job.id, error="MemoryError: out of memory")
    assert (failed.status, failed.error, failed.run) == ("failed", "MemoryError: out of memory", None)
    assert retrieval_run(job_id=job.id).status == "failed" and Run.objects.count() == 0
    assert retrieval_fail(job_id=job.id, error="later").error == "MemoryError: out of memory"
    assert retrieval_fail(job_id=12345, error="gone") is None


def test_the_task_retries_a_transient_error_then_records_it(project, monkeypatch):
    def down(*args, **kwargs):
        raise ConnectionError("the database went away")

    monkeypatch.setattr(retrieval_module, "bm25_retrieve", down)
    job = retrieval_create(project=project, retriever="bm25", name="retried")
    retrieval_task.apply(args=[job.id])  # retries run eagerly, then the job is given up
    job.refresh_from_db()
    assert (job.status, job.attempts, job.error) == ("failed", 3, "ConnectionError: the database went away")
    assert Run.objects.count() == 0


def test_names_are_never_taken_twice(project):
    retrieval_run(job_id=retrieval_request(project=project, retriever="bm25", name="taken").id)
    with pytest.raises(RetrievalError, match="has a run named 'taken'"):
        retrieval_request(project=project, retriever="dense", name=" taken ")
    writing = retrieval_request(project=project, retriever="bm25", name="writing")
    with pytest.raises(RetrievalError, match=f"job {writing.id} is writing a run named 'writing'"):
        retrieval_request(project=project, retriever="bm25", name="writing")
    retrieval_fail(job_id=writing.id, error="gave up")
    assert retrieval_request(project=project, retriever="bm25", name="writing").status == "pending"


def test_a_name_taken_while_the_job_ran_fails_it(project):
    first = retrieval_request(project=project, retriever="bm25", name="race")
    retrieval_fail(job_id=first.id, error="gave up")
    second = retrieval_request(project=project, retriever="bm25", name="race")
    RetrievalJob.objects.filter(id=first.id).update(status="pending", finished_at=None)  # as if redelivered
    assert retrieval_run(job_id=second.id).status == "done"
    lost = retrieval_run(job_id=first.id)
    assert (lost.status, lost.run) == ("failed", None) and "race" in lost.error
    assert Run.objects.filter(name="race").count() == 1


@pytest.mark.parametrize(("options", "message"), [
    ({"retriever": "splade"}, "unknown retriever 'splade'"),
    ({"retriever": "bm25", "depth": 0}, "depth must be 1 to 10000, got 0"),
    ({"retriever": "dense", "depth": 10_001}, "depth must be 1 to 10000, got 10001"),
    ({"retriever": "cascade", "first_depth": 50, "keep": 60}, "keep <= first depth"),
    ({"retriever": "dense", "k1": 1.2}, "k1 and b are BM25's"),
    ({"retriever": "bm25", "b": 1.5}, "0 <= b <= 1"),
    ({"retriever": "bm25", "model": "var/models/x"}, "uses no encoder model"),
    ({"retriever": "dense", "model": "/etc"}, "not under a model root"),
    ({"retriever": "bm25", "name": "  "}, "the run name is empty"),
    ({"retriever": "bm25", "name": "nl\nrun"}, r"^the run name holds a control character \(U\+000A\) at position 3"),
])
def test_requests_that_cannot_run_are_refused(project, options, message):
    with pytest.raises(RetrievalError, match=message):
        retrieval_request(project=project, **{"name": "x", **options})
    assert RetrievalJob.objects.count() == 0


def test_an_encoder_no_longer_under_a_model_root_fails_the_job(project, settings, tmp_path):
    folder = tmp_path / "models" / "encoder"
    folder.mkdir(parents=True)
    settings.MODEL_ROOTS = [tmp_path / "models"]
    job = retrieval_request(project=project, retriever="dense", name="moved", model=str(folder))
    settings.MODEL_ROOTS = []
    failed = retrieval_run(job_id=job.id)
    assert (failed.status, failed.run) == ("failed", None) and "not under a model root" in failed.error


def test_a_project_without_passages_fails_the_job(project):
    project.passages.all().delete()
    failed = retrieval_run(job_id=retrieval_request(project=project, retriever="bm25", name="empty").id)
    assert failed.status == "failed" and "0 passages: there is nothing to retrieve" in failed.error


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_runs_a_queued_job(tmp_path, worker):
    project = small_scoring_project(tmp_path / "b", queries=QUERIES, passages=PASSAGES, slug="w")
    job = retrieval_request(project=project, retriever="bm25", name="on a worker", depth=5)
    finished = RetrievalJob.objects.filter(id=job.id, finished_at__isnull=False)
    wait_for(finished.exists, "no worker ran the retrieval job", seconds=90, every=0.3)
    job.refresh_from_db()
    assert (job.status, job.attempts, job.run.queries) == ("done", 1, QUERIES)
