"""What every kind of background work does to its job row (labeling/models/jobs.py), whatever the work is: a
worker taking it, and giving up on it. Each kind's `<kind>_run` / `<kind>_fail` pair calls these, and
labeling/tasks.py runs the pair the one way (retry, then record)."""
from __future__ import annotations

from datetime import datetime

from django.db.models import F, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling.models import MAX_ERROR_CHARS, Job


def job_take(jobs: QuerySet[Job], *, now: datetime | None = None, **also: object) -> int:
    """A worker takes the jobs in `jobs` (the caller has filtered them to the ones that may run): running, one
    attempt more, started now unless an earlier attempt started them, and the kind's own columns in `also` set in
    the same UPDATE (a heartbeat: no other worker may see the job taken without it). Returns the rows taken."""
    now = now or timezone.now()
    return jobs.update(status=Job.Status.RUNNING, attempts=F("attempts") + 1,
                       started_at=Coalesce(F("started_at"), Value(now)), finished_at=None, **also)


def job_fail(jobs: QuerySet[Job], *, error: str, now: datetime | None = None) -> int:
    """Give up on the unfinished jobs in `jobs`: failed, finished, with the error (cut to MAX_ERROR_CHARS). A
    job finished already keeps what it has. Returns the rows failed."""
    return jobs.filter(finished_at__isnull=True).update(
        status=Job.Status.FAILED, error=error[:MAX_ERROR_CHARS], finished_at=now or timezone.now()
    )
