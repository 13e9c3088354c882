"""The generic audit job: one worker owns an audit at a time. A second delivery of its message (Redis redelivers a
task that runs past its visibility timeout) leaves an audit a live worker holds alone; an audit whose worker died
(no heartbeat for JOB_STALL_SECONDS) is taken again and starts over; a worker that lost its audit stops."""
from datetime import timedelta

import pytest
from django.utils import timezone

from labeling.models import AuditJob
from labeling.services import audit as service
from labeling.services.audit import audit_request, audit_run
from tests.factories import PairFactory, PassageFactory, ProjectFactory, QueryFactory
from tests.scoring_fixtures import minilm_judge

pytestmark = pytest.mark.django_db
PARAMETERS = {"sample": 3, "seed": 0, "tests": ["consistency"]}


@pytest.fixture
def job():
    project = ProjectFactory()
    for q in range(2):
        query = QueryFactory(project=project, text=f"Does the company report flood risk {q}?")
        for d in range(2):
            passage = PassageFactory(project=project, text=f"The company reports flood risk at site {q}{d}.")
            PairFactory(project=project, query=query, passage=passage, reference_grade=d)
    return audit_request(project=project, judge=minilm_judge(project), kind=AuditJob.Kind.PERTURBATION,
                         parameters=PARAMETERS)


def test_a_live_worker_keeps_its_audit_and_a_dead_one_loses_it(job):
    AuditJob.objects.filter(id=job.id).update(status=AuditJob.Status.RUNNING, attempts=1, heartbeat_at=timezone.now())
    audit_run(job_id=job.id)  # the redelivered message
    job.refresh_from_db()
    assert (job.status, job.attempts, job.done, job.report) == ("running", 1, 0, {})

    stale = timezone.now() - timedelta(hours=1)
    AuditJob.objects.filter(id=job.id).update(heartbeat_at=stale)
    audit_run(job_id=job.id)
    job.refresh_from_db()
    assert (job.status, job.attempts, job.done) == ("done", 2, job.total)
    assert [row["test"] for row in job.report["rows"]] == ["consistency"]


def test_a_worker_that_lost_its_audit_stops_and_reports_nothing(job, monkeypatch, settings):
    settings.AUDIT_BATCH = 2
    scored = []
    real_score = service._score

    def take_over_after_first_batch(job_row, probes, owned):
        # Another worker takes the audit over (its attempt number moves on) while this one scores.
        original_update = owned.update

        def update(**fields):
            if "done" in fields and not scored:
                scored.append(fields["done"])
                AuditJob.objects.filter(id=job_row.id).update(attempts=99)
            return original_update(**fields)

        monkeypatch.setattr(owned, "update", update)
        return real_score(job_row, probes, owned)

    monkeypatch.setattr(service, "_score", take_over_after_first_batch)
    audit_run(job_id=job.id)
    job.refresh_from_db()
    assert scored == [2] and job.status == "running" and job.report == {} and job.attempts == 99
