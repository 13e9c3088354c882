"""What every kind of background work does to its job row (labeling/models/jobs.py), whatever the work is: a
worker taking it, and giving up on it. Each kind's `<kind>_run` / `<kind>_fail` pair calls these, and
labeling/tasks.py runs the pair the one way (retry, then record)."""
from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import DatabaseError, connection
from django.db.models import F, Q, QuerySet, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling.job_kinds import JobKind
from labeling.models import MAX_ERROR_CHARS, Job

logger = logging.getLogger(__name__)


def job_free(now: datetime, *, stall_seconds: float | None = None) -> Q:
    """Jobs no live worker holds: not running, or running without a heartbeat for `stall_seconds`
    (JOB_STALL_SECONDS unless given): its worker left it (job_heartbeat releases what it held) or died. The one
    rule of every take, so that a second delivery of a task (a Celery retry, or Redis delivering again a task that
    runs past its visibility timeout) never runs a job beside the worker that holds it."""
    stale = now - timedelta(seconds=settings.JOB_STALL_SECONDS if stall_seconds is None else stall_seconds)
    return ~Q(status=Job.Status.RUNNING) | Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale)


def job_take(jobs: QuerySet[Job], *, now: datetime | None = None, stall_seconds: float | None = None,
             **also: object) -> int:
    """A worker takes the jobs in `jobs` (the caller has filtered them to the ones that may run) that no live worker
    holds (job_free): running, one attempt more, started now unless an earlier attempt started them, its heartbeat
    now, and the kind's own columns in `also` set in the same UPDATE (no other worker may see the job taken without
    a heartbeat). Returns the rows taken: 0 when another worker holds them, and the caller then leaves them be."""
    now = now or timezone.now()
    return job_attempt(jobs.filter(job_free(now, stall_seconds=stall_seconds)), now=now, **also)


def job_attempt(jobs: QuerySet[Job], *, now: datetime | None = None, **also: object) -> int:
    """What job_take writes, without its rule: for a job many workers share, each holding its own part by the
    kind's own rule (scoring's chunks, claimed one worker each), every part claimed counts as an attempt."""
    now = now or timezone.now()
    also.setdefault("heartbeat_at", now)
    return jobs.update(status=Job.Status.RUNNING, attempts=F("attempts") + 1,
                       started_at=Coalesce(F("started_at"), Value(now)), finished_at=None, **also)


def job_fail(jobs: QuerySet[Job], *, error: str, now: datetime | None = None) -> int:
    """Give up on the unfinished jobs in `jobs`: failed, finished, with the error (cut to MAX_ERROR_CHARS). A
    job finished already keeps what it has. Returns the rows failed."""
    return jobs.filter(finished_at__isnull=True).update(
        status=Job.Status.FAILED, error=error[:MAX_ERROR_CHARS], finished_at=now or timezone.now()
    )


def job_cancel(job: Job) -> Job:
    """Stop an unfinished job: cancelled and finished now; its worker, whose next write matches a running row no
    more, stops there. A finished job is left as it is. Returns the row as it now is."""
    type(job).objects.filter(id=job.id, finished_at__isnull=True).update(
        status=Job.Status.CANCELLED, finished_at=timezone.now())
    job.refresh_from_db()
    return job


# A cached result recomputed by a worker when asked (the kinds with a debounce_setting: the validation report, the
# Systems page's evaluation): one row per result, at most one computation queued at a time, at most one per the
# kind's debounce seconds after the last one started.
def _pending_again(now: datetime) -> dict[str, object]:
    """A row asked for afresh: its queueing time is kept in `heartbeat_at` (no worker beats for a pending row) so
    that a row whose task was lost is known."""
    return {"status": Job.Status.PENDING, "error": "", "attempts": 0, "started_at": None, "finished_at": None,
            "heartbeat_at": now}


def refresh_none_pending(kind: JobKind, now: datetime) -> Q:
    """A cached result's row with no recomputation pending: none was ever asked for, the last one asked for is done
    or failed, or it has been running, or waiting since it was queued, longer than the kind's time limit (its worker
    or its task was lost, a broker flushed: nothing else would ever end it, and a project's bound on pending
    computations would stay taken). The condition of the one UPDATE that decides, so that of two requests at once
    only one queues."""
    before = now - timedelta(seconds=kind.time_limit)
    lost = Q(status=Job.Status.RUNNING, started_at__lt=before) | Q(status=Job.Status.PENDING, heartbeat_at__lt=before)
    return Q(requested_at__isnull=True) | lost | ~Q(status__in=[Job.Status.PENDING, Job.Status.RUNNING])


def _countdown(kind: JobKind, computed_at: datetime | None) -> float:
    """Seconds until a recomputation is due: at most one per the kind's debounce seconds after the last started."""
    if computed_at is None:
        return 0.0
    due = computed_at + timedelta(seconds=kind.debounce_seconds)
    return max(0.0, (due - timezone.now()).total_seconds())


def refresh_ask(kind: JobKind, rows: QuerySet[Job], *, now: datetime, user: AbstractBaseUser | None,
                **also: object) -> float | None:
    """Ask for a recomputation of the cached result in `rows` (its one row). When none is pending, the row is
    pending again, asked for by `user`, with the kind's own columns in `also`, and the countdown of the task to queue
    is returned; when one is pending, it only learns the time of the request (it reads the data as they are when it
    runs) and None is returned: nothing to queue."""
    if rows.filter(refresh_none_pending(kind, now)).update(requested_at=now, requested_by=user, **_pending_again(now),
                                                           **also):
        return _countdown(kind, rows.values_list("computed_at", flat=True).get())
    rows.update(requested_at=now)
    return None


def refresh_again(kind: JobKind, rows: QuerySet[Job], *, started: datetime, **also: object) -> float | None:
    """After a computation that started at `started` was stored (its row done): when requests arrived meanwhile, the
    row is pending again (with `also`) and the countdown of the next computation is returned; None otherwise."""
    if rows.filter(status=Job.Status.DONE, requested_at__gt=started).update(**_pending_again(timezone.now()), **also):
        return _countdown(kind, started)
    return None


class _Heartbeat(threading.Thread):
    """Writes `heartbeat_at` of the running jobs in `jobs` every `every` seconds until stopped or until none of them
    runs any more (finished, cancelled or swept). Its database connection is its own and closed when it ends."""

    def __init__(self, jobs: QuerySet[Job], every: float) -> None:
        super().__init__(name="job-heartbeat", daemon=True)
        self.jobs, self.every, self.stopped = jobs, every, threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.every):
                try:
                    if not self.jobs.filter(status=Job.Status.RUNNING).update(heartbeat_at=timezone.now()):
                        return
                except DatabaseError as exc:  # a locked SQLite file, a dropped connection: try again next beat
                    logger.warning("heartbeat of %s not written: %s", self.jobs.model.__name__, exc)
        finally:
            connection.close()


@contextmanager
def job_heartbeat(jobs: QuerySet[Job]) -> Iterator[None]:
    """While the block runs, the running jobs in `jobs` show that their worker lives: their `heartbeat_at` is
    written every JOB_HEARTBEAT_SECONDS by a thread of this process, so a job whose worker was killed (SIGKILL, out
    of memory, a machine lost) stops beating and the sweep gives it up, whatever its work is doing meanwhile (a
    long transaction, a model call). What the work itself does too long is the time limit's business. When the block
    ends, however it ends, the jobs it leaves running are released (a kind finishes its job inside the block)."""
    beat = _Heartbeat(jobs, settings.JOB_HEARTBEAT_SECONDS)
    beat.start()
    try:
        yield
    finally:
        beat.stopped.set()
        beat.join(timeout=5)
        _release(jobs)


def _release(jobs: QuerySet[Job]) -> None:
    """The worker leaves the jobs it still holds running (an error on the way out, for its task to retry): no
    heartbeat, so that the retry, or another worker, may take them at once (job_free)."""
    try:
        jobs.filter(status=Job.Status.RUNNING).update(heartbeat_at=None)
    except DatabaseError as exc:  # the error being raised may be this very database's: the sweep frees them later
        logger.warning("%s not released: %s", jobs.model.__name__, exc)


def scratch_root() -> Path:
    """Where jobs keep their local temporary files (JOB_SCRATCH_DIR): one folder per job and machine, named
    `<kind>-<job id>-...` so that a worker starting on this machine can remove what killed workers left
    (labeling.services.job_sweep.scratch_sweep)."""
    return Path(settings.JOB_SCRATCH_DIR)


@contextmanager
def job_scratch(kind: str, job_id: int) -> Iterator[Path]:
    """A fresh scratch folder for job `job_id` of `kind`, removed when the block ends, however it ends."""
    root = scratch_root()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"{kind}-{job_id}-", dir=root) as folder:
        yield Path(folder)
