"""Fair scoring: a job's chunks go to the workers a window at a time, not all at once.

A job keeps at most SCORING_WINDOW_CHUNKS x its priority chunks sent and unwritten; each chunk written (or given
up) sends the job's next one. The broker hands messages out in the order they came, so jobs running together take
the bulk workers in turn, in proportion to their priorities: a 20-chunk job started behind a 500-chunk one waits
for one window of the big job, not for all of it. Priority 1 is everyone's; a project admin may raise a job's.

Turns are shared by time, not by chunk: a slow judge's chunks are cut to about SCORING_CHUNK_SECONDS
(scoring.chunk_size_for), and a job whose chunks take less (a fast judge, whose chunks stop at
SCORING_CHUNK_PAIRS) keeps proportionally more of them sent, up to WINDOW_SCALE_MAX times as many, from the time its
own finished chunks took. Without it, MiniLM's 3-second chunks beside SmolLM2's 25-second ones got an eighth of
the worker.

Sending is marked on the chunk (`dispatched_at`) before the message goes, so the sweep can tell a chunk whose
message was lost (sent, never claimed, its job idle) from one that is simply not sent yet."""
from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError
from labeling.models import Judge, ScoringChunk, ScoringJob
from labeling.tasks import score_chunk_task

PRIORITY_MIN, PRIORITY_MAX = 1, 10


class PriorityError(DomainError):
    """A priority that is not a whole number from 1 to 10."""


class PriorityJobFinished(Conflict, PriorityError):
    """A priority asked of a job that no longer runs."""


def bulk_queue_for(judge: Judge) -> str:
    """The queue a judge's chunks (and audits) go to: GPU_QUEUE for a judge that runs a local model on a GPU when
    the operator declared one, else BULK_QUEUE."""
    device = str((judge.parameters or {}).get("device") or "")
    on_gpu = judge.backend in (Judge.Backend.HF, Judge.Backend.CROSSENCODER) and device.startswith("cuda")
    if settings.GPU_QUEUE and on_gpu:
        return settings.GPU_QUEUE
    return settings.BULK_QUEUE


def scoring_chunks_enqueue(chunk_ids: Sequence[int], *, queue: str | None = None) -> None:
    """Send the chunks to the workers (call it on commit: a worker must find the rows)."""
    for chunk_id in chunk_ids:
        score_chunk_task.apply_async((chunk_id,), queue=queue or settings.BULK_QUEUE)


# How many times SCORING_WINDOW_CHUNKS x priority a job of short chunks may keep sent; and how many of its newest
# finished chunks tell how long its chunks take.
WINDOW_SCALE_MAX, WINDOW_SAMPLE = 16, 8


def chunk_seconds(job: ScoringJob) -> float | None:
    """How long one of the job's chunks takes a worker: the seconds per pair its newest finished chunks measured
    (busy_seconds over timed_pairs) times their mean size; None before any is measured."""
    rows = list(ScoringChunk.objects.filter(job_id=job.id, finished_at__isnull=False, timed_pairs__gt=0)
                .order_by("-id").values_list("busy_seconds", "timed_pairs", "size")[:WINDOW_SAMPLE])
    timed = sum(pairs for _, pairs, _ in rows)
    if not timed:
        return None
    return sum(seconds for seconds, _, _ in rows) / timed * (sum(size for _, _, size in rows) / len(rows))


def window_size(job: ScoringJob) -> int:
    """SCORING_WINDOW_CHUNKS x priority chunks of about SCORING_CHUNK_SECONDS each: more of shorter chunks (up to
    WINDOW_SCALE_MAX times), so that jobs share the workers by time."""
    base = settings.SCORING_WINDOW_CHUNKS * job.priority
    seconds = chunk_seconds(job)
    if not seconds or seconds <= 0:
        return base
    return base * max(1, min(WINDOW_SCALE_MAX, round(settings.SCORING_CHUNK_SECONDS / seconds)))


def scoring_dispatch(*, job: ScoringJob) -> list[int]:
    """Fill the job's window: mark its next unsent chunks (in id order, the order the job wants them scored) sent
    and send them once the transaction commits. Returns the ids sent. Two callers at once cannot send a chunk twice:
    each chunk is marked by a conditional update, and only the caller whose update took it sends it."""
    if job.status != ScoringJob.Status.RUNNING:
        return []
    waiting = ScoringChunk.objects.filter(job_id=job.id, finished_at__isnull=True)
    room = window_size(job) - waiting.filter(dispatched_at__isnull=False).count()
    if room <= 0:
        return []
    candidates = list(waiting.filter(dispatched_at__isnull=True).order_by("id").values_list("id", flat=True)[:room])
    now = timezone.now()
    sent = [chunk_id for chunk_id in candidates
            if ScoringChunk.objects.filter(id=chunk_id, dispatched_at__isnull=True).update(dispatched_at=now)]
    if sent:
        queue = bulk_queue_for(job.judge)
        transaction.on_commit(lambda: scoring_chunks_enqueue(sent, queue=queue))
    return sent


def scoring_resend(*, job: ScoringJob, chunk_ids: Sequence[int]) -> None:
    """Send again chunks that were sent already (their message may have gone with a worker): a second delivery of a
    chunk some worker holds or has written is skipped, so sending again never scores twice."""
    ids = list(chunk_ids)
    if ids:
        queue = bulk_queue_for(job.judge)
        ScoringChunk.objects.filter(id__in=ids).update(dispatched_at=timezone.now())
        transaction.on_commit(lambda: scoring_chunks_enqueue(ids, queue=queue))


def priority_check(priority: object) -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise PriorityError(f"priority must be a whole number from {PRIORITY_MIN} to {PRIORITY_MAX}, got {priority!r}")


@transaction.atomic
def scoring_job_priority_set(*, job: ScoringJob, priority: int) -> ScoringJob:
    """Give a running job another share of the workers (project admins): a higher priority widens its window at
    once; a lower one lets its sent chunks run and sends fewer after them."""
    priority_check(priority)
    locked = ScoringJob.objects.select_for_update().select_related("judge").get(id=job.id)
    if locked.status != ScoringJob.Status.RUNNING:
        raise PriorityJobFinished(f"job {job.id} is {locked.status}: only a running job's priority can change")
    locked.priority = priority
    locked.save(update_fields=["priority"])
    scoring_dispatch(job=locked)
    return locked
