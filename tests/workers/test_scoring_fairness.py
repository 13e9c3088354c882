"""Fair scheduling with a real Celery worker process (a folder broker here, Redis in CI): a job sends its chunks a
window at a time, so a 20-chunk job started after a 500-chunk one finishes while the big one is still running; and
interactive work (a bundle import, a validation refresh) queued behind the big job is done within seconds while it
runs. The judge is MiniLM (an embedding judge): a one-pair chunk takes milliseconds, so the queue is what is tested."""
from __future__ import annotations

import io
import signal
import time
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from labeling.models import BundleImportJob, Pair, Passage, ScoringJob, ValidationResult
from labeling.selectors.job_states import scoring_job_state
from labeling.services.bundle_upload import bundle_import_request
from labeling.services.scoring import scoring_job_cancel, scoring_job_create
from labeling.services.validation import validation_request
from tests.factories import MembershipFactory, ProjectFactory, UserFactory
from tests.scoring_fixtures import minilm_judge, small_scoring_project
from tests.workers.test_scoring import broker, start_worker  # noqa: F401 - the broker fixture, the worker process

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
WINDOW = 4
CHUNK_SECONDS = 1e-6


def _wait(what: str, condition, timeout: float, log) -> float:
    """Seconds until `condition()` holds; fails naming `what` with the worker's log after `timeout`."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if condition():
            return time.monotonic() - start
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}; worker log:\n{log.read_text()[-3000:]}")


def _status(job: ScoringJob) -> ScoringJob:
    job.refresh_from_db()
    return job


def _small_bundle() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("queries.jsonl", '{"_id": "q1", "text": "Which targets?"}\n')
        archive.writestr("corpus.jsonl", "".join(f'{{"_id": "d{i}", "text": "passage {i}"}}\n' for i in range(50)))
    return buffer.getvalue()


@pytest.fixture
def big_job_running(tmp_path, broker, settings):  # noqa: F811
    """A 500-chunk job of one judge, its worker already busy with it; yields (project, big job, env, log)."""
    # Chunks of a millisecond would widen the window by up to WINDOW_SCALE_MAX (jobs share by time, tested in
    # tests/services/test_scoring_queues.py): with a chunk time this short every job keeps the plain window, which is
    # tested here.
    settings.SCORING_WINDOW_CHUNKS, settings.SCORING_CHUNK_SECONDS = WINDOW, CHUNK_SECONDS
    project = small_scoring_project(tmp_path / "b", queries=2, passages=260)
    big_judge, small_judge = minilm_judge(project, "minilm-big"), minilm_judge(project, "minilm-small")
    pair_ids = list(Pair.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    big = scoring_job_create(project=project, judge=big_judge, scope="selection", pair_ids=pair_ids[:500],
                             chunk_pairs=1)
    assert big.chunks.count() == 500
    # Only the window is in the queue: the rest is sent as chunks are written.
    assert big.chunks.filter(dispatched_at__isnull=False).count() == WINDOW
    env = {**broker, "MEDIA_ROOT": str(settings.MEDIA_ROOT), "SCORING_WINDOW_CHUNKS": str(WINDOW),
           "SCORING_CHUNK_SECONDS": str(CHUNK_SECONDS)}
    log = tmp_path / "worker.log"
    worker = start_worker(env, log)
    try:
        _wait("the big job to start", lambda: _status(big).done >= 5, 240, log)
        yield project, big, small_judge, pair_ids, log
    finally:
        scoring_job_cancel(job=big)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=60)


def test_a_small_job_then_an_import_and_a_refresh_finish_while_a_huge_job_runs(big_job_running):
    project, big, small_judge, pair_ids, log = big_job_running
    small = scoring_job_create(project=project, judge=small_judge, scope="selection", pair_ids=pair_ids[:20],
                               chunk_pairs=1)
    assert small.chunks.count() == 20
    state = scoring_job_state(small)
    # Behind one window of the big job, not behind its 495 waiting chunks.
    assert state.name == "running" or (state.name == "queued" and state.ahead <= WINDOW), state
    _wait("the small job", lambda: _status(small).status == ScoringJob.Status.DONE, 120, log)
    big = _status(big)
    assert small.done == 20 and small.failed == 0
    assert big.status == ScoringJob.Status.RUNNING and big.done < 400, (big.done, "the big job barely waited")
    # The two shared the worker in turn: while the small job ran, the big one went on too.
    small_chunks = small.chunks.order_by("finished_at")
    first, last = small_chunks.first().finished_at, small_chunks.last().finished_at
    interleaved = big.chunks.filter(finished_at__gt=first, finished_at__lt=last).count()
    assert 10 <= interleaved <= 40, interleaved
    _interactive_work_does_not_wait(project, big, log)


def _interactive_work_does_not_wait(project, big: ScoringJob, log) -> None:
    """An import and a validation refresh started behind the big job (one setup for both checks: it is the slow
    part) are done while it still runs."""
    other = ProjectFactory(slug="other")
    admin = UserFactory(username="owner")
    MembershipFactory(project=other, user=admin, role="admin")
    reported = ProjectFactory(slug="reported")
    job = bundle_import_request(project=other, upload=SimpleUploadedFile("small.zip", _small_bundle()), user=admin)
    validation_request(project=reported)

    def refreshed() -> bool:
        result = ValidationResult.objects.filter(project=reported).first()
        return result is not None and not result.is_stale

    # A chunk takes milliseconds; an interactive task waits for at most the chunk in the worker's hands.
    imported = _wait("the import", lambda: BundleImportJob.objects.get(id=job.id).status == "done", 30, log)
    _wait("the validation refresh", refreshed, 30, log)
    assert Passage.objects.filter(project=other).count() == 50
    big = _status(big)
    assert big.status == ScoringJob.Status.RUNNING and big.done < 450, (big.done, imported)
