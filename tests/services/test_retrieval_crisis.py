"""The crisis paper's double cascade (section 3.8) as a cascade preset, on a 30-passage fixture: each stage's
passages per query are the cut-offs computed here from the paper's wording. "after applying BM25, we selected the
top 200 for each query [...] After the reranking, we select the top 60 documents for each query [...] the filtered
corpus aggregates 60 documents times the number of queries in Q in the worst case (duplicates are removed). The
dense retriever selects the top 200 (or the top 10% of the corpus size if it is less than 200). [...] After the
final reranking, we keep only the top 10% of the documents." The first re-ranking is checked against
sentence-transformers' CrossEncoder (tests.services.test_retrieval_rerank.sigmoid_reranked)."""
from __future__ import annotations

import io
import math
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Membership, Project, RetrievalJob, Run
from labeling.services.bundle_import import bundle_import
from labeling.services.judges import judge_create
from labeling.services.retrieval import RetrievalError, retrieval_create, retrieval_run
from tests.factories import MembershipFactory, UserFactory
from tests.scoring_fixtures import SAMPLE, small_scoring_project
from tests.services.test_retrieval_rerank import MAX_LENGTH, ranked, sigmoid_reranked
from tests.views.test_systems import _cells

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path, settings, reranker_root):
    settings.MODEL_ROOTS = [reranker_root]
    project = small_scoring_project(tmp_path / "b", queries=3, passages=30)
    judge_create(project=project, name="rerank", backend="crossencoder", model=str(reranker_root / "reranker"),
                 max_length=MAX_LENGTH)
    return project


def expected_stages(project, folder, *, bm25_depth, keep, dense_depth, dense_fraction, final_fraction):
    """Per query, the passages each stage leaves, by hand: BM25's hits (a plain BM25 run of that depth), the
    cross-encoder's best `keep` of them, then for the filtered corpus F (the union, each passage once) the dense
    cut min(dense_depth, floor(dense_fraction |F|)) and the final ceil(final_fraction x that)."""
    bm25 = retrieval_run(job_id=retrieval_create(project=project, retriever="bm25", name=f"bm25-{bm25_depth}",
                                                 depth=bm25_depth).id).run
    lexical = ranked(bm25)
    reranked = sigmoid_reranked(project, bm25, folder, keep=keep)
    filtered = {passage for rows in reranked.values() for passage, _ in rows}
    dense = min(dense_depth, math.floor(dense_fraction * len(filtered)))
    final = math.ceil(final_fraction * dense)
    return lexical, reranked, filtered, dense, final


def check(run, lexical, reranked, filtered, dense, final):
    crisis = run.parameters["crisis"]
    per_stage = [stage["per_query"] for stage in crisis["stages"]]
    queries = list(lexical)
    assert per_stage[0] == {q: len(lexical[q]) for q in queries}
    assert per_stage[1] == {q: len(reranked[q]) for q in queries}
    assert per_stage[2] == dict.fromkeys(queries, dense)
    assert per_stage[3] == dict.fromkeys(queries, final)
    assert (crisis["filtered_corpus"], crisis["dense_cut"], crisis["final_keep"]) == (len(filtered), dense, final)
    stored = ranked(run)
    assert {q: len(rows) for q, rows in stored.items()} == dict.fromkeys(queries, final)
    assert all(passage in filtered for rows in stored.values() for passage, _ in rows)
    assert [stage["stage"] for stage in run.parameters["stage_seconds"]] == [
        "bm25", "cross-encoder re-rank", "dense over the filtered corpus", "final cross-encoder re-rank"]
    assert all(stage["seconds"] >= 0 for stage in run.parameters["stage_seconds"])
    assert run.kind == "cascade" and run.entries == final * len(queries)


def test_the_paper_cut_offs_on_30_passages(project, reranker_root):
    job = retrieval_create(project=project, retriever="cascade", name="crisis", crisis={"judge": "rerank"})
    assert (job.parameters["first_depth"], job.parameters["keep"]) == (200, 60)
    assert {key: job.parameters["crisis"][key] for key in ("preset", "dense_depth", "dense_fraction",
                                                           "final_fraction")} == {
        "preset": "crisis-double-cascade", "dense_depth": 200, "dense_fraction": 0.1, "final_fraction": 0.1}
    done = retrieval_run(job_id=job.id)
    assert done.status == "done", done.error
    # 30 passages: BM25's hits are every passage sharing a word with the query (fewer than 200), all kept by the
    # re-ranking (fewer than 60); F is their union, a tenth of it (floored) is below 200.
    expected = expected_stages(project, str(reranker_root / "reranker"), bm25_depth=200, keep=60, dense_depth=200,
                               dense_fraction=0.1, final_fraction=0.1)
    lexical, reranked, filtered, dense, final = expected
    assert all(len(reranked[q]) == len(lexical[q]) for q in lexical)
    assert 10 <= len(filtered) <= 30 and dense == len(filtered) // 10 and final == 1
    check(done.run, *expected)


def test_every_cut_off_bites_when_set_smaller(project, reranker_root):
    settings = {"dense_depth": 3, "dense_fraction": 0.5, "final_fraction": 0.5}
    done = retrieval_run(job_id=retrieval_create(project=project, retriever="cascade", name="crisis small",
                                                 first_depth=10, keep=4, crisis={"judge": "rerank", **settings}).id)
    assert done.status == "done", done.error
    expected = expected_stages(project, str(reranker_root / "reranker"), bm25_depth=10, keep=4, **settings)
    lexical, reranked, filtered, dense, final = expected
    # BM25 10 -> 4 kept per query -> F of 4 to 12 passages -> dense min(3, floor(|F| / 2)) -> ceil(half) of it.
    assert all(len(rows) == 10 for rows in lexical.values()) and all(len(rows) == 4 for rows in reranked.values())
    assert 4 <= len(filtered) <= 12 and dense == min(3, len(filtered) // 2) and final == (dense + 1) // 2
    # The first re-ranking's kept passages are the cross-encoder's best four of BM25's ten.
    check(done.run, *expected)


def test_plain_runs_record_their_stage_times(project):
    run = retrieval_run(job_id=retrieval_create(project=project, retriever="bm25", name="b", depth=5,
                                                rerank=[{"judge": "rerank", "keep": 2}]).id).run
    assert [stage["stage"] for stage in run.parameters["stage_seconds"]] == ["bm25", "re-rank by rerank"]


@pytest.mark.parametrize(("arguments", "message"), [
    ({"retriever": "bm25", "crisis": {"judge": "rerank"}}, "cascade preset"),
    ({"retriever": "cascade", "crisis": {"judge": "rerank"}, "rerank": [{"judge": "rerank", "keep": 2}]},
     "no further re-rank"),
    ({"retriever": "cascade", "crisis": {"judge": "nobody"}}, "nobody"),
    ({"retriever": "cascade", "crisis": {"judge": "rerank", "top": 3}}, "optionally dense_depth"),
    ({"retriever": "cascade", "crisis": {"judge": "rerank", "final_fraction": 0}}, "final fraction"),
    ({"retriever": "cascade", "crisis": {"judge": "rerank", "dense_fraction": "10%"}}, "must be a number"),
])
def test_a_crisis_cascade_that_cannot_run_is_refused_naming_why(project, arguments, message):
    with pytest.raises(RetrievalError, match=message):
        retrieval_create(project=project, name="x", **arguments)


def test_the_command_runs_the_preset_and_prints_each_stages_time(project):
    out = io.StringIO()
    call_command("retrieve", "--project", project.slug, "--preset", "crisis-double-cascade", "--judge", "rerank",
                 "--name", "crisis cli", "--first-depth", "10", "--keep", "4", "--dense-depth", "3",
                 "--dense-fraction", "0.5", "--inline", stdout=out)
    run = Run.objects.get(project=project, name="crisis cli")
    assert run.kind == "cascade" and run.parameters["crisis"]["dense_fraction"] == 0.5
    assert run.parameters["crisis"]["final_fraction"] == 0.1  # left out: the paper's
    assert re.search(r"Stages: bm25 [\d.]+ s, cross-encoder re-rank [\d.]+ s, dense over the filtered corpus "
                     r"[\d.]+ s, final cross-encoder re-rank [\d.]+ s", out.getvalue())
    with pytest.raises(CommandError, match="needs --judge"):
        call_command("retrieve", "--project", project.slug, "--preset", "crisis-double-cascade", "--name", "y",
                     "--inline", stdout=io.StringIO())
    with pytest.raises(CommandError, match="give --preset"):
        call_command("retrieve", "--project", project.slug, "--retriever", "bm25", "--judge", "rerank", "--name",
                     "z", "--inline", stdout=io.StringIO())


def test_the_api_and_the_systems_form_start_the_preset(project, client, django_capture_on_commit_callbacks):
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    api = APIClient()
    api.force_authenticate(admin)
    where = reverse("api:retrieval-list", args=[project.slug])
    with django_capture_on_commit_callbacks():
        started = api.post(where, {"retriever": "cascade", "name": "api", "first_depth": 10, "keep": 4,
                                   "crisis": {"judge": "rerank", "dense_fraction": 0.5}}, format="json")
    assert started.status_code == 202, started.content
    stored = started.json()["parameters"]["crisis"]
    assert (stored["judge"], stored["dense_depth"], stored["dense_fraction"], stored["final_fraction"]) == (
        "rerank", 200, 0.5, 0.1)
    refused = api.post(where, {"retriever": "cascade", "name": "x", "crisis": {"judge": "rerank",
                                                                             "final_fraction": 2}}, format="json")
    assert refused.status_code == 422 and "final fraction" in refused.json()["message"]

    client.force_login(admin)
    form = {"retriever": "cascade", "name": "form", "depth": 8, "first_depth": 10, "keep": 4, "rerank_judge": "rerank",
            "rerank_keep": 2, "preset": "crisis-double-cascade", "dense_depth": 3, "dense_fraction": 0.5,
            "final_fraction": 0.5}
    with django_capture_on_commit_callbacks():
        assert client.post(reverse("labeling:retrieval_start", args=[project.slug]), form).status_code == 302
    job = RetrievalJob.objects.get(name="form")
    assert "rerank" not in job.parameters and job.parameters["crisis"]["dense_depth"] == 3
    wrong = client.post(reverse("labeling:retrieval_start", args=[project.slug]),
                        form | {"name": "form 2", "retriever": "bm25"})
    assert wrong.status_code == 400 and "choose the cascade retriever" in wrong.content.decode()
    estimate = client.post(reverse("labeling:retrieval_start", args=[project.slug]),
                           form | {"name": "", "estimate": "1"})
    assert estimate.status_code == 400 and "does not cover the crisis double cascade" in estimate.content.decode()


def test_the_systems_page_shows_each_runs_time_beside_its_measures(client, settings, reranker_root):
    """Table 5 of the paper: each retriever's time beside its effectiveness (and the significance marks)."""
    settings.MODEL_ROOTS = [reranker_root]
    bundle_import(path=SAMPLE, project_slug="cr")
    project = Project.objects.get(slug="cr")
    judge_create(project=project, name="ce", backend="crossencoder", model=str(reranker_root / "reranker"),
                 max_length=MAX_LENGTH)
    runs = {"lexical": {"retriever": "bm25", "depth": 8},
            "multi-stage": {"retriever": "cascade", "first_depth": 8, "keep": 4,
                            "crisis": {"judge": "ce", "dense_fraction": 0.5}}}
    for name, options in runs.items():
        done = retrieval_run(job_id=retrieval_create(project=project, name=name, **options).id)
        assert done.status == "done", done.error
    viewer = UserFactory()
    MembershipFactory(project=project, user=viewer, role=Membership.Role.VIEWER)
    client.force_login(viewer)
    html = client.get(reverse("labeling:systems", args=["cr"]), {"source": ["human"]}).content.decode()
    board = _cells(html, "human")
    for name in runs:
        run = Run.objects.get(project=project, name=name)
        total = sum(stage["seconds"] for stage in run.parameters["stage_seconds"])
        # Shown to 2 decimals (Django rounds halves up, Python's format to even: compare within half a unit).
        assert float(board[name][-1]) == pytest.approx(total, abs=0.0051), name
        # The Runs table's row (the leaderboard above it has rows of the same runs).
        runs_table = re.search(r'<table class="data" id="runs">(.*?)</table>', html, re.DOTALL).group(1)
        row = re.search(rf'<tr data-run="{name}">.*?<td class="num" data-seconds[^>]*>(.*?)</td>', runs_table,
                        re.DOTALL)
        shown = " ".join(re.sub(r"<[^>]+>", " ", row.group(1)).split()).split()[0]
        assert float(shown) == pytest.approx(total, abs=0.0051), name
    crisis = Run.objects.get(project=project, name="multi-stage").parameters["crisis"]
    assert (f"crisis double cascade: BM25 8, re-ranked by ce to 4, filtered corpus {crisis['filtered_corpus']}, "
            f"dense {crisis['dense_cut']}, re-ranked to {crisis['final_keep']}") in html
    kind = re.search(r'<tr data-run="multi-stage">.*?<td data-kind>(.*?)</td>', runs_table, re.DOTALL).group(1)
    assert kind.startswith("crisis double cascade")
    assert crisis["dense_cut"] == min(200, crisis["filtered_corpus"] // 2)
    assert crisis["final_keep"] == math.ceil(crisis["dense_cut"] / 10)
