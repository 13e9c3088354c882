"""retrieval_estimate: what a BM25, dense or cascade run would take here, from probes timed in this process, with
nothing stored. The parts it counts follow what the job does: a dense run embeds the passages the cache lacks (all
before the first run, none after it, one after its text changed), a cascade at most queries x first depth of them;
a request the job would refuse is refused alike. How close the time comes is measured by bench/estimate_time.py."""
from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from labeling.models import PassageEmbeddings, RetrievalJob, Run
from labeling.services.retrieval import RetrievalError, retrieval_create, retrieval_run
from labeling.services.retrieval_estimate import retrieval_estimate
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db
QUERIES, PASSAGES = 3, 20


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=QUERIES, passages=PASSAGES)


def test_bm25_is_timed_on_the_whole_small_corpus_and_encodes_nothing(project):
    found = retrieval_estimate(project=project, retriever="bm25", depth=10)
    assert (found.queries, found.passages, found.to_encode) == (QUERIES, PASSAGES, 0)
    assert found.bm25_s > 0 and found.encode_s is None and found.load_s is None
    assert found.wall_s == found.bm25_s and found.basis == "BM25 timed on the whole corpus"


def test_a_dense_run_embeds_what_the_cache_lacks_and_the_estimate_counts_just_that(project):
    before = retrieval_estimate(project=project, retriever="dense", depth=10)
    assert before.to_encode == PASSAGES and before.encode_s > 0 and before.load_s > 0 and before.bm25_s is None
    assert before.wall_s == pytest.approx(before.encode_s + before.load_s)
    assert not PassageEmbeddings.objects.exists() and not RetrievalJob.objects.exists()  # nothing stored
    retrieval_run(job_id=retrieval_create(project=project, retriever="dense", name="d", depth=10).id)
    after = retrieval_estimate(project=project, retriever="dense", depth=10)
    assert after.to_encode == 0 and f"{PASSAGES} passages embedded before" in after.basis
    assert after.encode_s < before.encode_s  # only the queries are left to encode
    passage = project.passages.order_by("id").first()
    passage.text += " A sentence added later."
    passage.save()
    assert retrieval_estimate(project=project, retriever="dense", depth=10).to_encode == 1


def test_a_cascade_embeds_the_candidates_of_bm25(project):
    from labeling.services.retrieval import retrieval_bm25_params, retrieval_corpus
    from models_llm.retrieval.bm25 import bm25_retrieve

    corpus = retrieval_corpus(project, use_definition=False)
    hits = bm25_retrieve(corpus.passage_texts, corpus.query_texts, depth=2, params=retrieval_bm25_params({}))
    candidates = {int(i) for found in hits.indices for i in found}
    found = retrieval_estimate(project=project, retriever="cascade", first_depth=2, keep=1)
    assert found.to_encode == len(candidates) <= QUERIES * 2 and found.bm25_s > 0 and found.encode_s > 0


@pytest.mark.parametrize("options, message", [
    ({"retriever": "bm25", "model": "x"}, "uses no encoder model"),
    ({"retriever": "dense", "depth": 0}, "depth must be 1"),
    ({"retriever": "cascade", "first_depth": 2, "keep": 3}, "keep <= first depth"),
])
def test_what_a_job_would_refuse_is_refused_before_anything_is_timed(project, options, message):
    with pytest.raises(RetrievalError, match=message):
        retrieval_estimate(project=project, **options)


def test_the_command_says_the_time_and_starts_nothing(project):
    out = StringIO()
    call_command("retrieve", "--project", project.slug, "--retriever", "dense", "--name", "d", "--estimate",
                 stdout=out)
    text = out.getvalue()
    assert f"dense over {PASSAGES} passages and {QUERIES} queries: about" in text
    assert f"{PASSAGES} passages to embed" in text and "Nothing was started." in text
    assert not RetrievalJob.objects.exists() and not Run.objects.exists()
