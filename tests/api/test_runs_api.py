"""The runs, retrieval and pooling API: listing for members; uploading, deleting, starting retrievers and pooling
for admins; problems as `file:line`, the size limit, errors hidden from non-admins, pooling counted by hand."""
from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import Pair, PairSource, Passage, RetrievalJob, Run, RunEntry
from tests.endpoints import declare_endpoint
from tests.factories import JudgeFactory, PassageFactory
from tests.url_matrix import ADMIN, EXPERT, VIEWER, build_world

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    return build_world()


def api_as(world, role: str) -> APIClient:
    api = APIClient()
    api.force_authenticate(world.users[role])
    return api


def url(world, name: str, *args) -> str:
    return reverse(f"api:{name}", args=[world.project.slug, *args])


def trec(world, passages: list[Passage]) -> bytes:
    return "".join(f"{world.query.external_id} Q0 {p.external_id} {rank} {10 - rank} sys\n"
                   for rank, p in enumerate(passages, 1)).encode()


def upload(api, world, name: str, content: bytes, filename: str = "sys.trec"):
    return api.post(url(world, "run-list"), {"name": name, "description": "a system",
                                             "file": SimpleUploadedFile(filename, content)}, format="multipart")


def test_members_list_the_runs(world):
    body = api_as(world, EXPERT).get(url(world, "run-list")).json()
    assert [(r["name"], r["kind"], r["queries"], r["entries"], r["depth"]) for r in body] == [
        ("run-a", "imported", 1, 3, 3)]
    one = api_as(world, VIEWER).get(url(world, "run-detail", world.run.id)).json()
    assert one["name"] == "run-a" and one["created_by"] is None


def test_an_admin_uploads_a_run_and_a_bad_file_is_refused_line_by_line(world):
    api = api_as(world, ADMIN)
    passages = list(Passage.objects.filter(project=world.project).order_by("id"))
    created = upload(api, world, "sys", trec(world, passages[::-1]))
    assert created.status_code == 201
    assert (created.json()["name"], created.json()["entries"], created.json()["source"]) == ("sys", 3, "sys.trec")
    assert list(RunEntry.objects.filter(run__name="sys").order_by("rank").values_list("passage_id", flat=True)) == [
        p.id for p in passages[::-1]]

    bad = upload(api, world, "bad", trec(world, passages) + b"q9 Q0 x 1 nan sys\n", filename="bad.run")
    assert bad.status_code == 422
    assert bad.json() == {"code": "unprocessable", "message": "the run file has 3 problem(s)",
                          "errors": {"file": ["bad.run:4: score must be finite, got 'nan'",
                                              "bad.run:4: unknown query 'q9'", "bad.run:4: unknown passage 'x'"]}}
    assert upload(api, world, "sys", trec(world, passages)).json()["errors"]["file"] == [
        "sys.trec: a run named 'sys' exists"]
    assert not Run.objects.filter(name="bad").exists()
    assert upload(api_as(world, VIEWER), world, "v", trec(world, passages)).status_code == 403


@override_settings(RUN_UPLOAD_MAX_BYTES=1000)
def test_an_upload_over_the_limit_is_a_413(world):
    response = upload(api_as(world, ADMIN), world, "big", b"x" * 2000)
    assert response.status_code == 413 and "RUN_UPLOAD_MAX_BYTES" in response.json()["message"]
    assert not Run.objects.filter(name="big").exists()


def test_an_admin_deletes_a_run(world):
    assert api_as(world, VIEWER).delete(url(world, "run-detail", world.run.id)).status_code == 403
    api = api_as(world, ADMIN)
    assert api.delete(url(world, "run-detail", world.run.id)).status_code == 204
    assert not Run.objects.filter(id=world.run.id).exists()
    assert api.delete(url(world, "run-detail", world.run.id)).status_code == 404


def test_an_admin_starts_a_retriever_and_members_list_the_jobs(world, django_capture_on_commit_callbacks):
    api = api_as(world, ADMIN)
    with django_capture_on_commit_callbacks() as queued:
        started = api.post(url(world, "retrieval-list"),
                           {"retriever": "cascade", "name": "casc", "first_depth": 50, "keep": 20}, format="json")
    assert started.status_code == 202 and len(queued) == 1
    assert (started.json()["status"], started.json()["parameters"]) == (
        "pending", {"first_depth": 50, "keep": 20, "use_definition": False})
    refused = api.post(url(world, "retrieval-list"), {"retriever": "dense", "name": "d", "k1": 1.2}, format="json")
    assert refused.status_code == 422 and "k1 and b are BM25's" in refused.json()["message"]
    taken = api.post(url(world, "retrieval-list"), {"retriever": "bm25", "name": "run-a"}, format="json")
    assert taken.status_code == 409 and "has a run named 'run-a' already" in taken.json()["message"]
    assert api.post(url(world, "retrieval-list"), {"retriever": "tfidf", "name": "t"}, format="json").json()["errors"] == {
        "retriever": ['"tfidf" is not a valid choice.']}

    RetrievalJob.objects.filter(id=world.retrieval_job.id).update(status="failed", error="no /srv/models/x")
    listed = {job["name"]: job for job in api_as(world, EXPERT).get(url(world, "retrieval-list")).json()}
    assert set(listed) == {"casc", "run-b"} and listed["run-b"]["error"] == (
        "the retriever failed (a project admin sees the reason)")
    assert {job["name"]: job["error"] for job in api.get(url(world, "retrieval-list")).json()}["run-b"] == (
        "no /srv/models/x")
    viewer = api_as(world, VIEWER).post(url(world, "retrieval-list"), {"retriever": "bm25", "name": "x"}, format="json")
    assert viewer.status_code == 403


def test_pooling_previews_then_adds_the_runs_top_k(world):
    api = api_as(world, ADMIN)
    old = list(Passage.objects.filter(project=world.project).order_by("id"))
    new = [PassageFactory(project=world.project) for _ in range(3)]
    assert upload(api, world, "sys", trec(world, [new[0], old[0], new[1], new[2]])).status_code == 201
    # Depth 3 over run-a (the three pooled passages) and sys: new[0] and new[1] are new; old[0] is in both runs.
    body = {"runs": ["sys", "run-a"], "depth": 3, "dry_run": True}
    preview = api.post(url(world, "pool"), body, format="json")
    assert preview.status_code == 200
    assert {key: preview.json()[key] for key in ("new_pairs", "existing", "sources", "per_query", "cost")} == {
        "new_pairs": 2, "existing": 3, "sources": 6, "cost": None,
        "per_query": [{"query": world.query.external_id, "new": 2, "existing": 3}]}
    assert Pair.objects.filter(project=world.project).count() == 3

    added = api.post(url(world, "pool"), {**body, "dry_run": False}, format="json")
    assert added.status_code == 201 and added.json() == {"dry_run": False, "pairs": 2, "pool sources": 6}
    assert PairSource.objects.filter(pair__project=world.project, system__in=["sys", "run-a"]).count() == 6
    again = api.post(url(world, "pool"), {**body, "dry_run": False}, format="json")
    assert again.json() == {"dry_run": False, "pairs": 0, "pool sources": 0}


def test_a_pool_preview_with_a_judge_prices_judging_the_new_pairs(world):
    declare_endpoint("http://127.0.0.1:9", "local")
    JudgeFactory(project=world.project, name="gpt", backend="openai", model="gpt-4o-mini", price_in=0.15,
                 price_out=0.6, parameters={"endpoint": "local", "method": "ask"})
    api = api_as(world, ADMIN)
    new = [PassageFactory(project=world.project, text="Adaptation measures for floods.") for _ in range(2)]
    assert upload(api, world, "sys", trec(world, new)).status_code == 201
    cost = api.post(url(world, "pool"), {"runs": ["sys"], "depth": 5, "dry_run": True, "judge": "gpt"},
                    format="json").json()["cost"]
    assert (cost["judge"], cost["pairs"]) == ("gpt", 2)
    assert cost["cost_usd"] == pytest.approx((cost["prompt_tokens"] * 0.15 + cost["completion_tokens"] * 0.6) / 1e6)
    assert Pair.objects.filter(project=world.project).count() == 3  # the estimate's pairs were rolled back


def test_pooling_names_what_is_wrong(world):
    api = api_as(world, ADMIN)
    unknown = api.post(url(world, "pool"), {"runs": ["nope"], "depth": 3}, format="json")
    assert unknown.status_code == 404 and "has no run 'nope' (its runs: run-a)" in unknown.json()["message"]
    assert api.post(url(world, "pool"), {"runs": [], "depth": 3}, format="json").status_code == 400
    assert api.post(url(world, "pool"), {"runs": ["run-a"], "depth": 0}, format="json").status_code == 400
    judge = api.post(url(world, "pool"), {"runs": ["run-a"], "dry_run": True, "judge": "nobody"}, format="json")
    assert judge.status_code == 404 and "no judge 'nobody'" in judge.json()["message"]
    assert api_as(world, VIEWER).post(url(world, "pool"), {"runs": ["run-a"]}, format="json").status_code == 403
