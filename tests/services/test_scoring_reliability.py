"""Jobs that cannot hang or pay twice (issue 14, findings 4 to 6): one start per judge however it is asked for,
a chunk claimed before its model is called, parts written as they come, a sweep that brings lost chunks back,
and a chunk that keeps losing its worker given up with that reason; every call counts toward the cost."""
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from labeling.models import Judgment, Membership, ScoringChunk, ScoringJob
from labeling.selectors.scoring import job_progress
from labeling.services.judges import judge_create
from labeling.services.scoring import (
    scoring_chunk_run,
    scoring_job_create,
    scoring_request,
    scoring_sweep,
)
from tests.endpoints import declare_endpoint
from tests.factories import MembershipFactory, UserFactory
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion
from tests.scoring_fixtures import small_scoring_project

pytestmark = pytest.mark.django_db


@pytest.fixture
def project(tmp_path):
    return small_scoring_project(tmp_path / "b", queries=2, passages=5)


@pytest.fixture
def server():
    with FakeOpenAI(default=lambda body: Reply(body=completion("[Guess]: Yes\n[Confidence]: 0.9", 10, 5))) as fake:
        yield fake


@pytest.fixture
def judge(project, server):
    return judge_create(project=project, name="asker", backend="openai", model="m", method="ask",
                        endpoint=declare_endpoint(server.base_url), max_retries=0)


def admin(project):
    user = UserFactory()
    MembershipFactory(project=project, user=user, role=Membership.Role.ADMIN)
    return user


def test_starting_twice_resumes_the_running_job(project, judge, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        first, created = scoring_request(project=project, judge=judge)
        again, created_again = scoring_request(project=project, judge=judge, scope="all")
    assert created and not created_again and again.id == first.id
    assert ScoringJob.objects.filter(judge=judge).count() == 1


def test_two_clicks_and_two_api_calls_make_one_job(client, project, judge, django_capture_on_commit_callbacks):
    user = admin(project)
    client.force_login(user)
    with django_capture_on_commit_callbacks(execute=False):
        for _ in range(2):
            client.post(reverse("labeling:job_start", args=[project.slug, judge.name]), {"scope": "missing"})
        api = APIClient()
        api.force_authenticate(user)
        url = reverse("api:job-list", args=[project.slug])
        answers = [api.post(url, {"judge": judge.name, "scope": "missing"}, format="json") for _ in range(2)]
    assert ScoringJob.objects.filter(judge=judge).count() == 1
    assert [a.status_code for a in answers] == [200, 200]
    assert {a.json()["id"] for a in answers} == {ScoringJob.objects.get(judge=judge).id}
    page = client.get(reverse("labeling:judges", args=[project.slug]))
    assert "already has job" in page.content.decode()


def test_a_selection_leaves_out_pairs_a_running_job_still_has_to_write(project, judge,
                                                                       django_capture_on_commit_callbacks):
    pairs = list(project.pairs.order_by("id").values_list("id", flat=True))
    with django_capture_on_commit_callbacks(execute=False):
        first, _ = scoring_request(project=project, judge=judge, scope="selection", pair_ids=pairs[:3])
        second, created = scoring_request(project=project, judge=judge, scope="selection", pair_ids=pairs[:5])
        third, created_third = scoring_request(project=project, judge=judge, scope="selection", pair_ids=pairs[:2])
    assert created and second.total == 2 and second.id != first.id
    assert not created_third and third.id == first.id


def test_a_chunk_another_worker_holds_is_skipped_without_calling_the_model(project, judge, server):
    job = scoring_job_create(project=project, judge=judge)
    chunk = job.chunks.order_by("id").first()
    ScoringChunk.objects.filter(id=chunk.id).update(claimed_by="other:1:t", claimed_at=timezone.now())
    assert scoring_chunk_run(chunk_id=chunk.id, worker="me:2:t") == 0
    assert server.bodies == []
    chunk.refresh_from_db()
    assert chunk.finished_at is None and chunk.claimed_by == "other:1:t"


def test_parts_are_written_as_they_come_and_a_resumed_chunk_starts_where_it_stopped(project, judge, server, settings):
    settings.SCORING_WRITE_PAIRS = 2
    job = scoring_job_create(project=project, judge=judge)
    chunk = job.chunks.order_by("id").first()
    # A worker wrote the first part and died while the second part (2 pairs) was with the model.
    ScoringChunk.objects.filter(id=chunk.id).update(claimed_by="dead:1:t", claimed_at=timezone.now())
    assert scoring_chunk_run(chunk_id=chunk.id, worker="dead:1:t") == 5  # the same worker may go on
    assert len(server.bodies) == 5
    rest = job.chunks.order_by("id").last()
    ScoringChunk.objects.filter(id=rest.id).update(
        claimed_by="dead:1:t", claimed_at=timezone.now() - timedelta(hours=1), written=2, in_flight=2,
        calls=2, prompt_tokens=20, completion_tokens=10,
    )
    Judgment.objects.bulk_create([
        Judgment(pair_id=pid, judge=judge, definition=None, status="ok", p_relevant=0.5, created_at=timezone.now())
        for pid in rest.pair_ids[:2]
    ])
    assert scoring_chunk_run(chunk_id=rest.id, worker="new:2:t") == 3
    sent_for_rest = len(server.bodies) - 5
    assert sent_for_rest == 3  # the two written pairs were not asked again
    rest.refresh_from_db()
    assert (rest.written, rest.lost_workers, rest.lost_calls, rest.in_flight) == (5, 1, 2, 0)
    job.refresh_from_db()
    assert job.status == ScoringJob.Status.DONE and job.done == 10
    progress = job_progress(job)
    # Every call counts: 5 + 3 answered now, 2 answered before the worker died, 2 lost with it.
    assert progress.calls == 5 + 3 + 2 + 2 and progress.lost_calls == 2
    assert progress.prompt_tokens == 10 * (5 + 3) + 20


def test_the_sweep_brings_back_lost_chunks_and_gives_up_after_the_limit(project, judge, server, settings,
                                                                       django_capture_on_commit_callbacks):
    settings.SCORING_CHUNK_MAX_ATTEMPTS = 2
    with django_capture_on_commit_callbacks(execute=False):
        job = scoring_job_create(project=project, judge=judge)
    ScoringJob.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(hours=2))
    lost, waiting = job.chunks.order_by("id")
    old = timezone.now() - timedelta(hours=1)
    job.chunks.update(dispatched_at=old)
    ScoringChunk.objects.filter(id=lost.id).update(claimed_by="dead:1:t", claimed_at=old, in_flight=3)
    job.refresh_from_db()
    assert job_progress(job).stalled
    with django_capture_on_commit_callbacks(execute=False) as queued:
        result = scoring_sweep()
    # The lost chunk is released and queued again; the job showed no progress, so the one sent an hour ago and never
    # claimed is sent again too (its message may have gone with the worker)...
    assert result.requeued == [lost.id, waiting.id] and result.failed == [] and len(queued) == 1
    # ...once per stall time: a sweep a minute later leaves it in the queue.
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert scoring_sweep().requeued == [] and queued == []
    lost.refresh_from_db()
    assert (lost.claimed_by, lost.lost_workers, lost.lost_calls) == ("", 1, 3)
    ScoringChunk.objects.filter(id=lost.id).update(claimed_by="dead-again:1:t", claimed_at=old)
    with django_capture_on_commit_callbacks(execute=False):
        result = scoring_sweep()
    assert result.failed == [lost.id]
    lost.refresh_from_db()
    assert lost.finished_at is not None and lost.failed and "lost its worker 2 times" in lost.error
    assert set(Judgment.objects.filter(pair_id__in=lost.pair_ids).values_list("status", flat=True)) == {"failed"}
    assert server.bodies == []
    assert scoring_chunk_run(chunk_id=waiting.id) == 5
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (ScoringJob.Status.DONE, 10, 5)
    assert "lost its worker" in job.last_error and not job_progress(job).stalled


def test_the_sweep_leaves_moving_chunks_alone(project, judge, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        job = scoring_job_create(project=project, judge=judge)
    ScoringJob.objects.filter(id=job.id).update(created_at=timezone.now() - timedelta(hours=2))
    moving = job.chunks.order_by("id").first()
    ScoringChunk.objects.filter(id=moving.id).update(claimed_by="alive:1:t", claimed_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=False) as queued:
        result = scoring_sweep()
    assert result.requeued == [] and result.failed == [] and queued == []
