"""Bundle archives through the upload service and the worker's run (labeling.services.bundle_upload), and project
creation by staff: the sample bundle zipped imports the rows its files hold (counted here from the files), one bad
line fails the job with `file:line` and stores nothing, a hostile archive is refused naming its member, the stored
upload is gone when the job ends, and the Import page shows each outcome."""
from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from labeling.exceptions import Forbidden
from labeling.models import BundleImportJob, Judgment, Label, Membership, Pair, Passage, Project, Query
from labeling.services import bundle_upload
from labeling.services.bundle_upload import (
    BundleImportFinished,
    BundleUploadError,
    bundle_import_cancel,
    bundle_import_fail,
    bundle_import_request,
    bundle_import_run,
    bundle_upload_refusal,
)
from labeling.services.projects import ProjectCreateError, project_create
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.scoring_fixtures import SAMPLE

pytestmark = pytest.mark.django_db


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sample_counts(folder: Path = SAMPLE) -> dict[str, int]:
    """What the sample's files hold, read here from the files: the reference for what an import stores."""
    qrels = [line.split("\t") for line in _lines(folder / "qrels" / "test.tsv")[1:]]
    judgments = [json.loads(line) for line in _lines(folder / "judgments.jsonl")]
    return {
        "queries": len(_lines(folder / "queries.jsonl")),
        "passages": len(_lines(folder / "corpus.jsonl")),
        "pairs": len({(row[0], row[1]) for row in qrels} | {(j["query_id"], j["doc_id"]) for j in judgments}),
        "reference grades": len(qrels),
        "judgments": len(judgments),
    }


def zip_folder(folder: Path, *, top: str | None = None, replace: dict[str, str] | None = None) -> bytes:
    """The folder as a zip (inside the folder `top` when given), with files' texts replaced as `replace` says."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                name = path.relative_to(folder).as_posix()
                data = (replace or {}).get(name)
                archive.writestr(f"{top}/{name}" if top else name, data if data is not None else path.read_bytes())
    return buffer.getvalue()


def _upload(data: bytes, name: str = "climretrieve.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/zip")


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def queued(monkeypatch):
    """The job ids sent to the workers (a test runs the worker's service itself)."""
    sent: list[int] = []
    monkeypatch.setattr(bundle_upload.bundle_import_task, "delay", sent.append)
    return sent


def _request(project: Project, data: bytes, django_capture_on_commit_callbacks, **options) -> BundleImportJob:
    with django_capture_on_commit_callbacks(execute=True):
        return bundle_import_request(project=project, upload=_upload(data, **options), user=None)


def test_staff_create_a_project_and_become_its_admin():
    staff = UserFactory(is_staff=True)
    project = project_create(by=staff, name=" Climate ", slug="climate")
    assert (project.name, project.slug) == ("Climate", "climate")
    assert Membership.objects.get(project=project, user=staff).role == Membership.Role.ADMIN
    with pytest.raises(ProjectCreateError) as taken:
        project_create(by=staff, name="Again", slug="climate")
    assert "slug" in taken.value.errors


def test_someone_not_staff_cannot_create_a_project():
    with pytest.raises(Forbidden):
        project_create(by=UserFactory(), name="Mine", slug="mine")
    assert not Project.objects.filter(slug="mine").exists()


def test_the_zipped_sample_imports_what_its_files_hold_and_the_upload_is_removed(
        queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    job = _request(project, zip_folder(SAMPLE, top="climretrieve"), django_capture_on_commit_callbacks)
    assert queued == [job.id]
    assert default_storage.exists(job.upload) and job.upload.startswith(f"bundles/{project.id}/")
    stored = job.upload

    job = bundle_import_run(job_id=job.id)

    expected = sample_counts()
    assert (job.status, job.stage, job.problems) == ("done", "finished", [])
    assert {key: job.written[key] for key in expected} == expected
    assert Query.objects.filter(project=project).count() == expected["queries"]
    assert Passage.objects.filter(project=project).count() == expected["passages"]
    assert Pair.objects.filter(project=project).count() == expected["pairs"]
    assert Judgment.objects.filter(pair__project=project).count() == expected["judgments"]
    assert job.upload == "" and not default_storage.exists(stored)
    # A redelivered message finds the job finished and writes nothing.
    assert bundle_import_run(job_id=job.id).written == job.written
    assert Pair.objects.filter(project=project).count() == expected["pairs"]


def test_all_pairs_makes_the_pool_every_query_x_passage(queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    with django_capture_on_commit_callbacks(execute=True):
        job = bundle_import_request(project=project, upload=_upload(zip_folder(SAMPLE)), all_pairs=True)
    job = bundle_import_run(job_id=job.id)
    counts = sample_counts()
    assert job.status == "done"
    assert Pair.objects.filter(project=project).count() == counts["queries"] * counts["passages"]


def test_one_bad_line_fails_the_job_with_its_file_and_line_and_stores_nothing(
        queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    lines = _lines(SAMPLE / "judgments.jsonl")
    lines[6] = lines[6].replace('"confidence": 0.7', '"confidence": 1.7')  # line 7: not a probability
    assert '"confidence": 1.7' in lines[6]
    job = _request(project, zip_folder(SAMPLE, replace={"judgments.jsonl": "\n".join(lines) + "\n"}),
                   django_capture_on_commit_callbacks)
    stored = job.upload

    job = bundle_import_run(job_id=job.id)

    assert job.status == "failed" and job.problems_total == 1
    assert job.problems[0].startswith("judgments.jsonl:7: ")
    assert job.written == {}
    assert not Query.objects.filter(project=project).exists() and not Passage.objects.filter(project=project).exists()
    assert not default_storage.exists(stored) and job.upload == ""


def test_a_hostile_archive_fails_the_job_naming_its_member(queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("queries.jsonl", (SAMPLE / "queries.jsonl").read_bytes())
        archive.writestr("../../corpus.jsonl", b"{}\n")
    job = bundle_import_run(job_id=_request(project, buffer.getvalue(), django_capture_on_commit_callbacks).id)
    assert job.status == "failed" and "'../../corpus.jsonl'" in job.problems[0]
    assert not Query.objects.filter(project=project).exists()


def test_an_archive_without_a_bundle_says_what_is_missing_without_the_workers_folder(
        queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("notes.txt", b"hello")
    job = bundle_import_run(job_id=_request(project, buffer.getvalue(), django_capture_on_commit_callbacks).id)
    assert job.status == "failed"
    assert job.problems == [("climretrieve.zip: no queries.jsonl (bundle) or question.jsonl (DIRAS input) at the "
                             "archive's top or in its one top folder")]


def test_giving_up_on_a_job_removes_its_upload(queued, django_capture_on_commit_callbacks):
    job = _request(ProjectFactory(), zip_folder(SAMPLE), django_capture_on_commit_callbacks)
    stored = job.upload
    job = bundle_import_fail(job_id=job.id, error="OperationalError: database is locked")
    assert job.status == "failed" and job.error.startswith("OperationalError")
    assert not default_storage.exists(stored)


def test_a_worker_that_died_too_often_fails_the_job(queued, django_capture_on_commit_callbacks):
    job = _request(ProjectFactory(), zip_folder(SAMPLE), django_capture_on_commit_callbacks)
    BundleImportJob.objects.filter(id=job.id).update(attempts=bundle_upload.MAX_ATTEMPTS, status="running")
    job = bundle_import_run(job_id=job.id)
    assert job.status == "failed" and "stopped" in job.error
    assert not Query.objects.exists()


def test_only_archives_under_the_limit_are_taken(settings, queued):
    project = ProjectFactory()
    with pytest.raises(BundleUploadError, match="zip or .tar.gz"):
        bundle_import_request(project=project, upload=_upload(b"{}", name="queries.jsonl"))
    settings.BUNDLE_UPLOAD_MAX_BYTES = 10
    with pytest.raises(BundleUploadError, match="BUNDLE_UPLOAD_MAX_BYTES"):
        bundle_import_request(project=project, upload=_upload(b"x" * 11))
    assert bundle_upload_refusal(content_length="11") is not None
    assert bundle_upload_refusal(content_length="10") is None and bundle_upload_refusal(content_length="x") is None
    assert not BundleImportJob.objects.exists()


def test_the_import_page_shows_counts_written_and_problems(client, queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("labeling:bundle_upload", args=["cr"]),
                               {"file": _upload(zip_folder(SAMPLE))})
    assert response.status_code == 302
    bundle_import_run(job_id=queued[-1])
    bad = zip_folder(SAMPLE, replace={"queries.jsonl": "{\n"})
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("labeling:bundle_upload", args=["cr"]), {"file": _upload(bad, name="bad.zip")})
    bundle_import_run(job_id=queued[-1])

    page = client.get(reverse("labeling:bundles", args=["cr"])).content.decode()
    assert f'data-written-kind="queries">{sample_counts()["queries"]}<' in page
    assert "queries.jsonl:1: " in page and "nothing was stored" in page


def test_an_upload_puts_the_queries_that_name_no_set_into_the_query_set_asked_for(
        client, queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    # One query of the sample names its own set: the set asked for on upload goes to the others only.
    lines = _lines(SAMPLE / "queries.jsonl")
    first = json.loads(lines[0])
    first["metadata"] = {**first.get("metadata", {}), "query_set": "llm"}
    queries = "\n".join([json.dumps(first), *lines[1:]]) + "\n"
    url = reverse("labeling:bundle_upload", args=["cr"])
    refused = client.post(url, {"file": _upload(zip_folder(SAMPLE)), "query_set": "hu\x07man"})
    assert refused.status_code == 400 and "the query set name holds a control character" in refused.content.decode()
    assert not BundleImportJob.objects.exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"file": _upload(zip_folder(SAMPLE, replace={"queries.jsonl": queries})),
                                     "query_set": " human "})
    assert response.status_code == 302
    job = bundle_import_run(job_id=queued[-1])
    assert (job.status, job.query_set) == ("done", "human")
    sets = dict(Query.objects.filter(project=project).values_list("external_id", "metadata__query_set"))
    assert sets.pop(first["_id"]) == "llm" and set(sets.values()) == {"human"} and len(sets) == len(lines) - 1
    page = client.get(reverse("labeling:bundles", args=["cr"])).content.decode()
    assert '<span class="mono" data-query-set>human</span>' in page

    api = f"/api/projects/{project.slug}/bundles/"
    answer = client.post(api, {"file": _upload(zip_folder(SAMPLE)), "query_set": "x" * 101})
    assert answer.status_code == 400 and "query_set" in json.dumps(answer.json())
    # A string the schema admits that the rule of names refuses: 422 naming the field (schemathesis' positive data).
    answer = client.post(api, {"file": _upload(zip_folder(SAMPLE)), "query_set": "hu\x07man"})
    assert answer.status_code == 422 and "query_set" in json.dumps(answer.json())
    with django_capture_on_commit_callbacks(execute=True):
        answer = client.post(api, {"file": _upload(zip_folder(SAMPLE)), "query_set": "llm"})
    assert answer.status_code == 202 and answer.json()["query_set"] == "llm"


def test_the_upload_page_refuses_a_non_archive_and_a_request_too_large(client, settings, tmp_path):
    project = ProjectFactory(slug="cr")
    admin = UserFactory()
    MembershipFactory(project=project, user=admin, role=Membership.Role.ADMIN)
    client.force_login(admin)
    url = reverse("labeling:bundle_upload", args=["cr"])
    response = client.post(url, {"file": _upload(b"{}", name="queries.jsonl")})
    assert response.status_code == 400 and "upload a bundle as a .zip or .tar.gz" in response.content.decode()
    settings.BUNDLE_UPLOAD_MAX_BYTES = 100
    response = client.post(url, {"file": _upload(b"x" * 1000)})
    assert response.status_code == 413 and "BUNDLE_UPLOAD_MAX_BYTES" in response.content.decode()
    assert not BundleImportJob.objects.exists()


def test_staff_create_a_project_from_the_list_and_others_are_refused(client):
    staff = UserFactory(is_staff=True)
    client.force_login(staff)
    assert 'id="project-create"' in client.get(reverse("labeling:project_list")).content.decode()
    response = client.post(reverse("labeling:project_create"), {"name": "Climate", "slug": "climate", "scale": ""})
    assert response.status_code == 302 and response["Location"] == reverse("labeling:bundles", args=["climate"])
    response = client.post(reverse("labeling:project_create"), {"name": "X", "slug": "x", "scale": '{"grades": []}'})
    assert response.status_code == 400 and "non-empty list" in response.content.decode()

    client.force_login(UserFactory())
    assert 'id="project-create"' not in client.get(reverse("labeling:project_list")).content.decode()
    assert client.post(reverse("labeling:project_create"), {"name": "Y", "slug": "y"}).status_code == 403
    assert set(Project.objects.values_list("slug", flat=True)) == {"climate"}



def test_a_project_name_taken_whatever_its_case_is_refused_on_the_list_with_the_form_kept(client):
    staff = UserFactory(is_staff=True)
    client.force_login(staff)
    client.post(reverse("labeling:project_create"), {"name": "Climate", "slug": "climate"})
    response = client.post(reverse("labeling:project_create"), {"name": "CLIMATE", "slug": "climate-2",
                                                                 "description": "Second try"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "a project named &#x27;Climate&#x27; exists already: choose another name (project names are compared " \
           "ignoring case)" in html
    assert 'value="CLIMATE"' in html and 'value="climate-2"' in html
    assert list(Project.objects.values_list("slug", flat=True)) == ["climate"]


def _labels_bundle(labels: list[dict]) -> bytes:
    files = {
        "queries.jsonl": '{"_id": "q1", "text": "Which targets?"}\n',
        "corpus.jsonl": "".join(f'{{"_id": "d{i}", "text": "passage {i}"}}\n' for i in range(3)),
        "labels.jsonl": "".join(json.dumps(label) + "\n" for label in labels),
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return buffer.getvalue()


def _upload_as(user, project, data: bytes, django_capture_on_commit_callbacks) -> BundleImportJob:
    with django_capture_on_commit_callbacks(execute=True):
        job = bundle_import_request(project=project, upload=_upload(data), user=user)
    return bundle_import_run(job_id=job.id)


def test_an_uploaded_bundle_writes_labels_only_as_members_or_as_imported_annotators(
        queued, django_capture_on_commit_callbacks):
    """The review's forgery: a project admin (not staff) uploads labels in the name of the server's superuser and of
    a user of another project. They are written as import:NAME (inactive, no password), never as those accounts;
    a member of the project keeps their name."""
    project = ProjectFactory(slug="cr")
    owner = UserFactory(username="owner")
    MembershipFactory(project=project, user=owner, role="admin")
    root = UserFactory(username="root", is_superuser=True, is_staff=True)
    stranger = UserFactory(username="stranger")
    bob = UserFactory(username="bob")
    MembershipFactory(project=project, user=bob, role="expert")
    labels = [{"query_id": "q1", "doc_id": "d0", "annotator": "root", "label": 2},
              {"query_id": "q1", "doc_id": "d1", "annotator": "stranger", "label": 0},
              {"query_id": "q1", "doc_id": "d2", "annotator": "bob", "label": 1},
              {"query_id": "q1", "doc_id": "d2", "annotator": "newcomer", "label": 1}]
    job = _upload_as(owner, project, _labels_bundle(labels), django_capture_on_commit_callbacks)
    assert job.status == "done", job.problems
    assert not Label.objects.filter(annotator__in=[root, stranger]).exists()
    stored = dict(Label.objects.filter(pair__project=project).values_list("annotator__username", "grade")
                  .order_by("annotator__username"))
    assert stored == {"bob": 1, "import:newcomer": 1, "import:root": 2, "import:stranger": 0}
    imported = get_user_model().objects.filter(username__startswith="import:")
    assert imported.count() == 3 and not any(user.is_active or user.has_usable_password() for user in imported)
    assert job.written["annotators imported as import:NAME"] == 3
    # The same upload again writes nothing (the imported annotators are members now).
    again = _upload_as(owner, project, _labels_bundle(labels), django_capture_on_commit_callbacks)
    assert again.status == "done" and not again.written.get("labels") and not again.written.get("annotators")


def test_adjudicator_rows_in_an_upload_need_staff_and_nothing_is_stored_without(
        queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    owner = UserFactory(username="owner")
    MembershipFactory(project=project, user=owner, role="admin")
    labels = [{"query_id": "q1", "doc_id": "d0", "annotator": "owner", "label": 2, "role": "adjudicator"}]
    job = _upload_as(owner, project, _labels_bundle(labels), django_capture_on_commit_callbacks)
    assert job.status == "failed"
    assert job.problems == ["labels.jsonl:1: an adjudicator label (gold) needs a staff account to upload; ask staff, "
                            "or import the bundle on the server with manage.py import_bundle"]
    assert not Query.objects.filter(project=project).exists() and not Label.objects.exists()
    staff = UserFactory(username="staffer", is_staff=True)
    MembershipFactory(project=project, user=staff, role="admin")
    job = _upload_as(staff, project, _labels_bundle(labels), django_capture_on_commit_callbacks)
    assert job.status == "done", job.problems
    assert Label.objects.get().role == "adjudicator"


def test_a_cancelled_import_stores_nothing_and_loses_its_upload(queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    job = _request(project, zip_folder(SAMPLE), django_capture_on_commit_callbacks)
    stored = job.upload
    job = bundle_import_cancel(job=job)
    assert (job.status, job.stage, job.upload) == ("cancelled", "finished", "")
    assert not default_storage.exists(stored)
    # Its message still reaches a worker: the job is finished, nothing runs.
    assert bundle_import_run(job_id=job.id).status == "cancelled"
    assert not Query.objects.filter(project=project).exists()
    with pytest.raises(BundleImportFinished, match=f"import {job.id} had finished \\(cancelled\\)"):
        bundle_import_cancel(job=job)


def test_an_import_cancelled_while_it_imports_is_rolled_back(queued, monkeypatch, django_capture_on_commit_callbacks):
    """The cancel lands while the worker checks and writes every line (here: as the import starts, from what a
    test's one connection can do): the import's last act before it commits finds it and rolls everything back."""
    project = ProjectFactory(slug="cr")
    job = _request(project, zip_folder(SAMPLE), django_capture_on_commit_callbacks)
    real_import = bundle_upload.bundle_import

    def cancelled_meanwhile(**kwargs):
        bundle_import_cancel(job=job)
        return real_import(**kwargs)

    monkeypatch.setattr(bundle_upload, "bundle_import", cancelled_meanwhile)
    job = bundle_import_run(job_id=job.id)
    assert job.status == "cancelled" and job.upload == ""
    assert not Query.objects.filter(project=project).exists() and not Pair.objects.filter(project=project).exists()


def test_the_import_page_and_the_api_cancel_an_unfinished_import(client, queued, django_capture_on_commit_callbacks):
    project = ProjectFactory(slug="cr")
    admin = UserFactory(username="owner")
    MembershipFactory(project=project, user=admin, role="admin")
    first = _request(project, zip_folder(SAMPLE), django_capture_on_commit_callbacks)
    second = _request(project, zip_folder(SAMPLE), django_capture_on_commit_callbacks)
    client.force_login(admin)
    html = client.get(reverse("labeling:bundles", kwargs={"slug": project.slug})).content.decode()
    assert f'data-cancel-import="{first.id}"' in html and 'hx-trigger="every 2s"' in html
    response = client.post(reverse("labeling:bundle_cancel", kwargs={"slug": project.slug, "bundle_job_id": first.id}),
                           follow=True)
    assert f"Import {first.id} cancelled: nothing of it was stored." in response.content.decode()
    url = f"/api/projects/{project.slug}/bundles/{second.id}/cancel/"
    answer = client.post(url)
    assert answer.status_code == 200 and answer.json()["status"] == "cancelled"
    again = client.post(url)
    assert again.status_code == 409 and "had finished (cancelled)" in again.json()["message"]
    # Nothing is left unfinished: the list stops polling.
    html = client.get(reverse("labeling:bundles", kwargs={"slug": project.slug})).content.decode()
    assert 'hx-trigger="every 2s"' not in html and html.count("data-cancelled") == 2
    expert = UserFactory(username="expert")
    MembershipFactory(project=project, user=expert, role="expert")
    client.force_login(expert)
    assert client.post(url).status_code == 403


def test_a_gzip_bomb_run_in_an_uploaded_bundle_fails_the_job_naming_the_file(queued, django_capture_on_commit_callbacks):
    # The archive is honest; the run file in it expands 20 MB from 20 KB: read within the upload's limits.
    project = ProjectFactory(slug="cr")
    buffer = io.BytesIO(zip_folder(SAMPLE))
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("runs/bm25.trec.gz", gzip.compress(b"\n" * (20 << 20)))
    job = bundle_import_run(job_id=_request(project, buffer.getvalue(), django_capture_on_commit_callbacks).id)
    assert job.status == "failed"
    assert ("runs/bm25.trec.gz: unpacks to more than 200 times its compressed size (BUNDLE_MAX_RATIO): refused as a "
            "decompression bomb") in job.problems
    assert not Query.objects.filter(project=project).exists()
