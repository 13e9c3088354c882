"""Training files too large to read in a web request (issue 47, finding 5): above TRAINING_SET_INLINE_MAX_BYTES the
API (202 with the job) and the Fine-tuning page keep the upload and answer before any of it is stored; a real worker
stores it as a training set, or fails the job naming the bad line with nothing stored; the Import page follows the
job, a cancel stops it whether it waits or reads, and the sweep gives up one whose worker died."""
from __future__ import annotations

import csv
import io
from contextlib import contextmanager
from datetime import timedelta

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from annotator.celery import app
from labeling.models import BundleImportJob, TrainingExample, TrainingSet
from labeling.services import bundle_upload
from labeling.services.bundle_upload import bundle_import_run
from labeling.services.job_sweep import jobs_sweep
from tests.polling import wait_for
from tests.url_matrix import ADMIN, build_world

ROWS = 3_000
BAD_LINE = 2_500


def training_file(*, bad_line: int | None = None) -> bytes:
    """A DIRAS-layout CSV (question, document, guess, confidence) of ROWS rows over 40 questions, larger than the
    default TRAINING_SET_INLINE_MAX_BYTES; the row on `bad_line` has a confidence of 2."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["question", "document", "guess", "confidence"])
    for line in range(2, ROWS + 2):
        writer.writerow([f"question {line % 40}", f"passage {line}: " + "words " * 12, "Yes" if line % 2 else "No",
                         "2" if line == bad_line else "0.8"])
    content = out.getvalue().encode()
    assert len(content) > settings.TRAINING_SET_INLINE_MAX_BYTES
    return content


@contextmanager
def a_worker():
    """A real Celery worker on the test's own broker, started once the requests have answered."""
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=30):
        yield


def finished(*job_ids: int) -> bool:
    return BundleImportJob.objects.filter(id__in=job_ids, finished_at__isnull=False).count() == len(job_ids)


def admin_api(world) -> APIClient:
    api = APIClient()
    api.force_authenticate(world.users[ADMIN])
    return api


def api_upload(api, world, name: str, content: bytes, filename: str):
    return api.post(reverse("api:training-set-import", args=[world.project.slug]),
                    {"name": name, "held_out": 0.25, "seed": 1, "file": SimpleUploadedFile(filename, content)},
                    format="multipart")


def nothing_stored(world, name: str) -> bool:
    return not (TrainingSet.objects.filter(project=world.project, name=name).exists()
                or TrainingExample.objects.filter(training_set__project=world.project,
                                                  training_set__name=name).exists())


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_large_file_through_the_api_is_stored_by_a_worker_and_a_bad_one_fails_naming_its_line(private_broker):
    world = build_world()
    api = admin_api(world)
    queued = api_upload(api, world, "big", training_file(), "big.csv")
    assert queued.status_code == 202, queued.content
    body = queued.json()
    assert (body["training_set_name"], body["status"], body["file_name"]) == ("big", "pending", "big.csv")
    assert nothing_stored(world, "big"), "the request stored the file's rows itself"
    bad = api_upload(api, world, "bad", training_file(bad_line=BAD_LINE), "bad.csv")
    assert bad.status_code == 202 and nothing_stored(world, "bad")
    uploads = list(BundleImportJob.objects.filter(id__in=[body["id"], bad.json()["id"]]).values_list("upload",
                                                                                                 flat=True))
    assert len(uploads) == 2 and all(default_storage.exists(upload) for upload in uploads)
    # A name taken is refused at once, before the file is kept.
    taken = api_upload(api, world, "set-a", training_file(), "again.csv")
    assert taken.status_code == 409 and "already has a training set 'set-a'" in taken.json()["message"]

    with a_worker():
        wait_for(lambda: finished(body["id"], bad.json()["id"]), "the worker finished both imports")
    done = api.get(body["url"]).json()
    assert (done["status"], done["written"]) == ("done", {"training sets": 1, "examples": ROWS, "bad rows skipped": 0})
    listed = {row["name"]: row for row in api.get(reverse("api:training-set-list", args=[world.project.slug])).json()}
    # 40 questions, a quarter of them (10) held out, whole.
    assert (listed["big"]["file_count"], listed["big"]["held_out_count"]) == (ROWS, ROWS // 4)
    assert listed["big"]["parameters"]["seed"] == 1 and listed["big"]["created_by"] == ADMIN
    failed = api.get(bad.json()["url"]).json()
    assert failed["status"] == "failed"
    assert failed["problems"] == [f"bad.csv:{BAD_LINE}: the confidence 2 is outside [0, 1]"]
    assert nothing_stored(world, "bad")
    assert not any(default_storage.exists(upload) for upload in uploads), "an ended import kept its upload"


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_large_file_through_the_page_is_stored_by_a_worker_and_followed_on_the_import_page(private_broker, client):
    world = build_world()
    client.force_login(world.users[ADMIN])
    slug = world.project.slug
    url = reverse("labeling:training_set_import", args=[slug])
    sent = client.post(url, {"name": "big", "held_out": 0, "seed": 0,
                             "file": SimpleUploadedFile("big.csv", training_file())}, follow=True)
    assert nothing_stored(world, "big"), "the request stored the file's rows itself"
    job = BundleImportJob.objects.get(training_set_name="big")
    assert f"import {job.id} stores it as training set big on a worker" in sent.content.decode()
    client.post(url, {"name": "bad", "held_out": 0, "seed": 0,
                      "file": SimpleUploadedFile("bad.csv", training_file(bad_line=BAD_LINE))})
    failing = BundleImportJob.objects.get(training_set_name="bad")
    waiting = client.get(reverse("labeling:bundles", args=[slug])).content.decode()
    assert waiting.count("data-training-file") == 2 and 'hx-trigger="every 2s"' in waiting

    with a_worker():
        wait_for(lambda: finished(job.id, failing.id), "the worker finished both imports")
    html = client.get(reverse("labeling:bundles", args=[slug])).content.decode()
    assert f'<span data-written-kind="examples">{ROWS}</span> examples' in html
    assert f"<code data-problem>bad.csv:{BAD_LINE}: the confidence 2 is outside [0, 1]</code>" in html
    assert "upload the file again" in html and 'hx-trigger="every 2s"' not in html
    assert TrainingExample.objects.filter(training_set__name="big", training_set__project=world.project
                                          ).count() == ROWS
    assert nothing_stored(world, "bad")
    # The Fine-tuning page says where such a file goes.
    assert "data-import-worker" in client.get(reverse("labeling:finetune", args=[slug])).content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize("when", ["waiting", "reading", "read"])
def test_a_cancelled_import_stores_nothing_and_loses_its_upload(when, monkeypatch, django_capture_on_commit_callbacks):
    """The cancel (through the API) lands before a worker takes the job, as it starts reading the file, or once it
    has read every row, before it stores them; the worker's run (as a delivered task runs it) then stores nothing."""
    world = build_world()
    api = admin_api(world)
    with django_capture_on_commit_callbacks(execute=False):
        queued = api_upload(api, world, "big", training_file(), "big.csv").json()
    job = BundleImportJob.objects.get(id=queued["id"])
    cancel_url = reverse("api:bundle-cancel", args=[world.project.slug, job.id])

    def cancel() -> None:
        assert api.post(cancel_url).json()["status"] == "cancelled"

    read_file, rows_read = bundle_upload.training_file_read, []

    def read_cancelled(**kwargs):
        if when == "reading":
            cancel()
        read = read_file(**kwargs)
        rows_read.append(len(read.examples))
        if when == "read":
            cancel()
        return read

    if when == "waiting":
        cancel()
    monkeypatch.setattr(bundle_upload, "training_file_read", read_cancelled)
    ran = bundle_import_run(job_id=job.id)
    assert (ran.status, ran.stage, ran.upload, ran.written) == ("cancelled", "finished", "", {})
    assert nothing_stored(world, "big") and not default_storage.exists(job.upload)
    # A cancel that lands while the file is read stops the reading, not only the storing.
    assert rows_read == {"waiting": [], "reading": [], "read": [ROWS]}[when]
    again = api.post(cancel_url)
    assert again.status_code == 409 and "had finished (cancelled)" in again.json()["message"]


@pytest.mark.django_db
def test_an_import_whose_worker_died_is_given_up_by_the_sweep_without_its_upload(settings,
                                                                                 django_capture_on_commit_callbacks):
    settings.JOB_STALL_SECONDS = 60
    world = build_world()
    with django_capture_on_commit_callbacks(execute=False):
        queued = api_upload(admin_api(world), world, "big", training_file(), "big.csv").json()
    # Its worker took it and stopped beating five minutes ago.
    BundleImportJob.objects.filter(id=queued["id"]).update(status="running", stage="importing",
                                                           started_at=timezone.now() - timedelta(minutes=6),
                                                           heartbeat_at=timezone.now() - timedelta(minutes=5))
    stored = BundleImportJob.objects.get(id=queued["id"]).upload
    jobs_sweep()
    job = BundleImportJob.objects.get(id=queued["id"])
    assert (job.status, job.stage, job.upload) == ("failed", "finished", "")
    assert job.error.startswith("its worker stopped") and not default_storage.exists(stored)
    assert nothing_stored(world, "big")
