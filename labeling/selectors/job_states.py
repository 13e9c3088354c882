"""Where a job honestly stands, for the pages and the API: "queued (N ahead)" while it waits its turn, "running"
while its work moves, "stalled" only when the work a worker took has stopped moving (the sweep's rule,
labeling/services/job_sweep.py), or how it ended.

N ahead counts what the broker hands out before the job's first waiting task, read from the database (the broker
is not asked): in the bulk queue, the chunks sent and not yet taken of other scoring jobs (sent earlier), and the
jobs of the other bulk kinds created earlier and not yet taken; in the interactive queue, the imports created
earlier and not yet taken. Work a worker holds is not "ahead": it is being done."""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Max, Min
from django.utils import timezone

from labeling.job_kinds import kind_of
from labeling.models import (
    AuditJob,
    BundleImportJob,
    FineTuneJob,
    ReplayJob,
    RetrievalJob,
    ScoringChunk,
    ScoringJob,
)
from labeling.models.jobs import Job

# A running scoring job with no chunk in a worker's hands counts as running for this long after its last chunk was
# written (a worker between two chunks), then as queued behind the others.
RUNNING_GRACE_SECONDS = 30
# The bulk kinds other than scoring whose pending jobs wait in the bulk queue.
BULK_KINDS = (RetrievalJob, AuditJob, FineTuneJob, ReplayJob)


@dataclass(frozen=True)
class JobState:
    name: str  # queued, running, stalled, done, failed, cancelled
    ahead: int | None = None  # queued: the tasks before it in its queue
    stalled_for_s: float | None = None  # stalled: since its work last moved

    @property
    def text(self) -> str:
        if self.name == "queued":
            return "queued (next)" if not self.ahead else f"queued ({self.ahead:,} ahead)"
        return self.name


def _finished(job: Job) -> JobState | None:
    if job.status in (Job.Status.DONE, Job.Status.FAILED, Job.Status.CANCELLED):
        return JobState(name=str(job.status))
    return None


def _bulk_ahead(before: datetime, *, exclude_job: int | None = None) -> int:
    """Bulk tasks sent before `before` and not taken yet: other jobs' waiting chunks and pending bulk jobs."""
    chunks = ScoringChunk.objects.filter(finished_at__isnull=True, dispatched_at__lt=before, claimed_by="",
                                         job__status=ScoringJob.Status.RUNNING)
    if exclude_job is not None:
        chunks = chunks.exclude(job_id=exclude_job)
    pending = sum(kind.objects.filter(status=Job.Status.PENDING, created_at__lt=before).count() for kind in BULK_KINDS)
    return chunks.count() + pending


def scoring_job_state(job: ScoringJob) -> JobState:
    """A scoring job's state from its chunks: stalled when a chunk a worker claimed has not moved for
    SCORING_STALL_SECONDS (what the sweep takes back); running while a worker holds one of its chunks or wrote one
    in the last RUNNING_GRACE_SECONDS; otherwise queued behind the chunks sent before its own."""
    ended = _finished(job)
    if ended is not None:
        return ended
    now = timezone.now()
    open_chunks = ScoringChunk.objects.filter(job_id=job.id, finished_at__isnull=True)
    held = open_chunks.exclude(claimed_by="").aggregate(oldest=Min("claimed_at"))["oldest"]
    if held is not None:
        idle = (now - held).total_seconds()
        if idle > settings.SCORING_STALL_SECONDS:
            return JobState(name="stalled", stalled_for_s=idle)
        return JobState(name="running")
    last = ScoringChunk.objects.filter(job_id=job.id).aggregate(last=Max("finished_at"))["last"]
    if last is not None and now - last < timedelta(seconds=RUNNING_GRACE_SECONDS):
        return JobState(name="running")
    first_waiting = open_chunks.filter(dispatched_at__isnull=False).aggregate(first=Min("dispatched_at"))["first"]
    return JobState(name="queued", ahead=_bulk_ahead(first_waiting or now, exclude_job=job.id))


def job_state(job: Job) -> JobState:
    """Any other kind of job: queued while pending (N ahead in its queue), running while its worker's heartbeat is
    fresh (or released for its task's retry), stalled once it is older than its kind's stall time
    (labeling/job_kinds.py; the sweep then gives the job up or resumes it)."""
    if isinstance(job, ScoringJob):
        return scoring_job_state(job)
    ended = _finished(job)
    if ended is not None:
        return ended
    if job.status == Job.Status.PENDING:
        if isinstance(job, BundleImportJob):
            ahead = BundleImportJob.objects.filter(status=Job.Status.PENDING, created_at__lt=job.created_at).count()
        else:
            ahead = _bulk_ahead(job.created_at)
        return JobState(name="queued", ahead=ahead)
    # No heartbeat: its worker released it for its task's retry (job_heartbeat), which takes it again shortly.
    beat = job.heartbeat_at
    if beat is not None:
        idle = (timezone.now() - beat).total_seconds()
        if idle > kind_of(job).stall_seconds:
            return JobState(name="stalled", stalled_for_s=idle)
    return JobState(name="running")
