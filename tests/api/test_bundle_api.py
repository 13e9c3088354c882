"""The bundle import API with a token, as curl would use it: POST a zipped bundle to /api/projects/{slug}/bundles/,
202 with the job and its URL, poll the URL until it says done with the rows written (counted from the sample's
files) or failed with `file:line` and nothing stored; the size limit answers 413 before the body is read. Celery
runs eagerly here: the task, its service and the storage round trip are the real ones."""
from __future__ import annotations

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotator.celery import app
from labeling.models import BundleImportJob, Membership, Pair, Query
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.scoring_fixtures import SAMPLE
from tests.services.test_bundle_upload import _lines, sample_counts, zip_folder

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def eager(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = before


@pytest.fixture
def project():
    return ProjectFactory(slug="cr")


def _token_client(project, role: str = Membership.Role.ADMIN) -> APIClient:
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=role)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return api


def _post(api: APIClient, data: bytes, name: str = "climretrieve.zip", **fields):
    upload = SimpleUploadedFile(name, data, content_type="application/zip")
    return api.post(reverse("api:bundle-list", args=["cr"]), {"file": upload, **fields}, format="multipart")


def test_a_token_uploads_the_sample_and_polls_the_job_to_its_counts(project, django_capture_on_commit_callbacks):
    api = _token_client(project)
    with django_capture_on_commit_callbacks(execute=True):
        response = _post(api, zip_folder(SAMPLE, top="climretrieve"))
    assert response.status_code == 202
    job = response.json()
    assert job["url"].endswith(reverse("api:bundle-detail", args=["cr", job["id"]]))

    polled = api.get(job["url"]).json()
    expected = sample_counts()
    assert (polled["status"], polled["stage"], polled["problems"]) == ("done", "finished", [])
    assert {key: polled["written"][key] for key in expected} == expected
    assert Pair.objects.filter(project=project).count() == expected["pairs"]
    assert not default_storage.exists(BundleImportJob.objects.get(id=job["id"]).upload or "bundles/none")
    assert [row["id"] for row in api.get(reverse("api:bundle-list", args=["cr"])).json()] == [job["id"]]


def test_a_bad_line_comes_back_as_file_and_line_and_nothing_is_stored(project, django_capture_on_commit_callbacks):
    api = _token_client(project)
    queries = _lines(SAMPLE / "queries.jsonl")
    queries[2] = queries[2].replace('"_id"', '"id"')  # line 3 has no _id
    with django_capture_on_commit_callbacks(execute=True):
        job = _post(api, zip_folder(SAMPLE, replace={"queries.jsonl": "\n".join(queries) + "\n"})).json()
    polled = api.get(job["url"]).json()
    assert polled["status"] == "failed"
    assert any(problem.startswith("queries.jsonl:3: ") for problem in polled["problems"])
    assert not Query.objects.filter(project=project).exists()


def test_the_api_refuses_what_it_must(project, settings):
    expert = _token_client(project, Membership.Role.EXPERT)
    assert _post(expert, b"PK").status_code == 403
    admin = _token_client(project)
    refused = _post(admin, b"{}", name="queries.jsonl")
    assert refused.status_code == 422 and "zip or .tar.gz" in refused.json()["errors"]["file"][0]
    settings.BUNDLE_UPLOAD_MAX_BYTES = 100
    too_large = _post(admin, b"x" * 1000)
    assert too_large.status_code == 413 and "BUNDLE_UPLOAD_MAX_BYTES" in too_large.json()["message"]
    assert not BundleImportJob.objects.exists()
    anonymous = APIClient().post(reverse("api:bundle-list", args=["cr"]), {}, format="multipart")
    assert anonymous.status_code in {401, 403}
