"""The runs, retrieval and pooling API: listing for members; uploading, deleting, starting retrievers and pooling
for admins; problems as `file:line`, the size limit, errors hidden from non-admins, pooling counted by hand."""
from __future__ import annotations

import gzip

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from labeling.models import BundleImportJob, Pair, PairSource, Passage, RetrievalJob, Run, RunEntry
from labeling.services import bundle_upload
from labeling.services.bundle_upload import bundle_import_run
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


def test_a_run_name_that_is_not_one_line_is_refused_by_the_upload_and_the_retrieval(world):
    """Issue 30: a run's name is one line of visible characters, whichever way the run arrives."""
    api = api_as(world, ADMIN)
    passages = list(Passage.objects.filter(project=world.project).order_by("id"))
    uploaded = upload(api, world, "nl\nrun", trec(world, passages))
    assert uploaded.status_code == 422
    assert uploaded.json()["errors"]["file"][0].startswith(
        "sys.trec: the run name holds a control character (U+000A) at position 3")
    requested = api.post(url(world, "retrieval-list"), {"retriever": "bm25", "name": "nl\nrun"}, format="json")
    assert requested.status_code == 422
    assert requested.json()["message"].startswith("the run name holds a control character (U+000A) at position 3")
    assert not Run.objects.filter(name__startswith="nl").exists()
    assert not RetrievalJob.objects.filter(name__startswith="nl").exists()


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


ANOTHER_RETRIEVERS = "first_depth and keep are a cascade's: the {} retriever ranks depth passages per query"


@pytest.mark.parametrize(("body", "says"), [
    ({"retriever": "cascade", "depth": 100}, "depth is for bm25 and dense: a cascade ranks keep passages"),
    ({"retriever": "cascade", "depth": 1000, "first_depth": 50, "keep": 20}, "depth is for bm25 and dense"),
    ({"retriever": "bm25", "first_depth": 50}, ANOTHER_RETRIEVERS.format("bm25")),
    ({"retriever": "bm25", "depth": 10, "keep": 20}, ANOTHER_RETRIEVERS.format("bm25")),
    # The cascade's own defaults, named: still refused, as they would still be dropped.
    ({"retriever": "dense", "first_depth": 200, "keep": 60}, ANOTHER_RETRIEVERS.format("dense")),
    ({"retriever": "dense", "k1": 1.2}, "k1 and b are BM25's: the dense retriever takes neither"),
    ({"retriever": "dense", "b": 0.5}, "k1 and b are BM25's: the dense retriever takes neither"),
    ({"retriever": "bm25", "model": "var/models/encoder"}, "the bm25 retriever uses no encoder model"),
])
def test_a_setting_of_another_retriever_is_refused_and_nothing_is_queued(world, body, says,
                                                                        django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        response = api_as(world, ADMIN).post(url(world, "retrieval-list"), {"name": "new", **body}, format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "unprocessable" and says in response.json()["message"]
    assert not RetrievalJob.objects.filter(name="new").exists() and queued == []


@pytest.mark.parametrize(("body", "parameters"), [
    ({"retriever": "bm25"}, {"use_definition": False, "depth": 1000}),
    ({"retriever": "bm25", "depth": 5, "k1": 1.2, "b": 0.5}, {"use_definition": False, "depth": 5, "k1": 1.2, "b": 0.5}),
    ({"retriever": "dense", "depth": None, "model": ""}, {"use_definition": False, "depth": 1000}),  # null, blank: unsaid
    ({"retriever": "dense", "depth": 7, "use_definition": True}, {"use_definition": True, "depth": 7}),
    ({"retriever": "cascade"}, {"use_definition": False, "first_depth": 200, "keep": 60}),
    ({"retriever": "cascade", "first_depth": 50, "keep": 20, "k1": 1.0},
     {"use_definition": False, "first_depth": 50, "keep": 20, "k1": 1.0}),
])
def test_each_retriever_takes_its_own_settings_and_defaults_the_rest(world, body, parameters):
    response = api_as(world, ADMIN).post(url(world, "retrieval-list"), {"name": "new", **body}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["parameters"] == parameters == RetrievalJob.objects.get(name="new").parameters


@pytest.mark.parametrize("dry_run", [False, None])
def test_a_judge_without_a_dry_run_is_refused_not_dropped(world, dry_run):
    # Pooling for real answers the counts written: a judge there would price nothing.
    body = {"runs": ["run-a"], "depth": 3, "judge": world.judge.name, **({} if dry_run is None else {"dry_run": dry_run})}
    pairs, sources = Pair.objects.count(), PairSource.objects.count()
    response = api_as(world, ADMIN).post(url(world, "pool"), body, format="json")
    assert response.status_code == 422, response.json()
    assert response.json()["code"] == "unprocessable" and "dry_run" in response.json()["message"]
    assert response.json()["errors"] == {"judge": ["goes with dry_run true only"]}
    assert (Pair.objects.count(), PairSource.objects.count()) == (pairs, sources)
    blank = api_as(world, ADMIN).post(url(world, "pool"), {**body, "judge": ""}, format="json")
    assert blank.status_code == 201 and blank.json()["dry_run"] is False  # a blank judge names none


def test_an_uploaded_gzip_bomb_is_refused_naming_the_file_and_the_setting(world):
    # 20 MB of newlines in 20 KB: read within BUNDLE_EXPAND_MAX_BYTES and BUNDLE_MAX_RATIO, as a bundle's files are.
    response = upload(api_as(world, ADMIN), world, "bomb", gzip.compress(b"\n" * (20 << 20)), filename="bomb.trec.gz")
    assert response.status_code == 422
    assert response.json()["errors"]["file"][0] == ("bomb.trec.gz: unpacks to more than 200 times its compressed size "
                                                    "(BUNDLE_MAX_RATIO): refused as a decompression bomb")
    assert not Run.objects.filter(name="bomb").exists()


@override_settings(RUN_UPLOAD_INLINE_MAX_BYTES=200)
def test_a_run_file_too_large_to_read_in_the_request_is_stored_by_a_worker(world, monkeypatch,
                                                                          django_capture_on_commit_callbacks):
    """Finding 8: a run file is parsed in the web request only up to RUN_UPLOAD_INLINE_MAX_BYTES (a .gz once
    decompressed, however small it is compressed); a larger one becomes an import job a worker runs."""
    sent: list[int] = []
    monkeypatch.setattr(bundle_upload.bundle_import_task, "delay", sent.append)
    api = api_as(world, ADMIN)
    passages = list(Passage.objects.filter(project=world.project).order_by("id"))
    content = trec(world, passages[::-1]) + b"\n" * 500  # blank lines are skipped, but read
    assert len(gzip.compress(content)) < 200 < len(content)
    with django_capture_on_commit_callbacks(execute=True):
        queued = upload(api, world, "big", gzip.compress(content), filename="big.trec.gz")
    assert queued.status_code == 202
    body = queued.json()
    assert (body["run_name"], body["status"], body["file_name"]) == ("big", "pending", "big.trec.gz")
    assert sent == [body["id"]] and not Run.objects.filter(name="big").exists()
    stored = BundleImportJob.objects.get(id=body["id"]).upload
    job = bundle_import_run(job_id=body["id"])
    assert (job.status, job.written, job.upload) == ("done", {"runs": 1, "run entries": 3}, "")
    assert not default_storage.exists(stored)
    assert list(RunEntry.objects.filter(run__name="big").order_by("rank").values_list("passage_id", flat=True)) == [
        p.id for p in passages[::-1]]
    # A name taken is refused at once; bad lines fail the job with each problem, storing nothing.
    assert upload(api, world, "big", content).status_code == 422
    with django_capture_on_commit_callbacks(execute=True):
        bad = upload(api, world, "bad", content + b"q9 Q0 x 1 nan sys\n", filename="bad.run")
    assert bad.status_code == 202
    job = bundle_import_run(job_id=bad.json()["id"])
    assert job.status == "failed" and job.problems == ["bad.run:504: score must be finite, got 'nan'",
                                                       "bad.run:504: unknown query 'q9'",
                                                       "bad.run:504: unknown passage 'x'"]
    assert not Run.objects.filter(name="bad").exists()
