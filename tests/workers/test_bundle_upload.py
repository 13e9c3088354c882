"""A real Celery worker killed with SIGKILL in the middle of a bundle import: the next worker's sweep (Celery beat)
fails the job with the reason within the configured time, the upload and the scratch folder are gone, nothing of
the bundle is stored, and the Import page stops polling."""
from __future__ import annotations

import io
import signal
import time
import zipfile

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from labeling.models import BundleImportJob, Passage
from labeling.services.bundle_upload import bundle_import_request
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.workers.test_scoring import broker, start_worker  # noqa: F401 - the broker fixture, the worker process

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
PASSAGES = 150_000


def _big_bundle() -> bytes:
    """A bundle whose import takes seconds (a worker can be killed in the middle of it): many passages."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("queries.jsonl", '{"_id": "q1", "text": "Which targets?"}\n')
        archive.writestr("corpus.jsonl", "".join(f'{{"_id": "d{i}", "text": "passage number {i} of the corpus, '
                                                  f'about emission targets {i % 97}"}}\n' for i in range(PASSAGES)))
    return buffer.getvalue()


def _wait(job: BundleImportJob, condition, timeout: float, log) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if condition(job):
            return
        time.sleep(0.1)
    pytest.fail(f"timed out: import {job.status} ({job.stage}); worker log:\n{log.read_text()[-3000:]}")


def test_a_worker_killed_mid_import_is_swept_and_leaves_nothing(tmp_path, broker, settings, client):  # noqa: F811
    scratch = tmp_path / "scratch"
    env = {**broker, "MEDIA_ROOT": str(settings.MEDIA_ROOT), "JOB_SCRATCH_DIR": str(scratch),
           "JOB_HEARTBEAT_SECONDS": "1", "JOB_STALL_SECONDS": "5", "JOB_SWEEP_SECONDS": "1"}
    project = ProjectFactory(slug="big")
    admin = UserFactory(username="owner")
    MembershipFactory(project=project, user=admin, role="admin")
    first_log, second_log = tmp_path / "worker1.log", tmp_path / "worker2.log"
    first = start_worker(env, first_log)
    try:
        job = bundle_import_request(project=project, upload=SimpleUploadedFile("big.zip", _big_bundle()), user=admin)
        stored = job.upload
        _wait(job, lambda j: j.stage == "importing" and j.heartbeat_at is not None, 240, first_log)
        assert any(scratch.glob(f"bundle-import-{job.id}-*")), "the worker keeps the unpacked bundle in its scratch"
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    job.refresh_from_db()
    assert job.status == "running" and job.finished_at is None, "the import finished before the worker was killed"
    killed_at = time.monotonic()
    second = start_worker(env, second_log, beat=True)
    try:
        _wait(job, lambda j: j.finished_at is not None, 120, second_log)
        swept_after = time.monotonic() - killed_at
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert job.status == "failed" and job.stage == "finished"
    assert job.error.startswith("its worker stopped: no sign of life for 5 s (JOB_STALL_SECONDS)")
    # Within the stall time, a sweep interval and a worker's start.
    assert swept_after < 60
    assert job.upload == "" and not default_storage.exists(stored)
    assert not list(scratch.glob(f"bundle-import-{job.id}-*"))
    assert not Passage.objects.filter(project=project).exists()
    client.force_login(admin)
    html = client.get(reverse("labeling:bundles", kwargs={"slug": project.slug})).content.decode()
    assert 'hx-trigger="every 2s"' not in html and "its worker stopped" in html
