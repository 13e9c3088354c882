"""Fair scoring: chunks go to the workers a share at a time, shared between projects first, then between a
project's jobs.

Each project keeps at most SCORING_WINDOW_CHUNKS chunks (times the highest priority among its running jobs) sent and
unwritten on each queue, whatever the number of its running jobs there, and each job at most SCORING_WINDOW_CHUNKS
times its own priority; each chunk written (or given up) sends the project's next ones. The broker hands messages
out in the order they came (annotator/broker.py keeps that order for the folder broker), so projects running together
take the bulk workers in turn: a project with ten running jobs gets about what a project with one gets. A project's
share goes to its jobs in proportion to their priorities: at each dispatch, the job furthest below its part gets the
next chunk, and among equals the one sent to longest ago, so a project's jobs take turns instead of the first ones
holding the share until they end. When a job ends (done, cancelled), the dispatch that ends it hands its place to
the project's other jobs at once. Priority 1 is everyone's; only staff may raise it (priority_require), since a
higher priority widens its project's share of everyone's workers.

Turns are shared by time, not by chunk: a slow judge's chunks are cut to about SCORING_CHUNK_SECONDS
(scoring.chunk_size_for), and a job whose chunks take less (a fast judge, whose chunks stop at SCORING_CHUNK_PAIRS, or
SCORING_EMBEDDING_CHUNK_PAIRS for an embedding judge) counts each of them as that fraction of a chunk of the share,
up to WINDOW_SCALE_MAX of them per chunk, from the time its own finished chunks took. Without it, MiniLM's 3-second
chunks beside SmolLM2's 25-second ones got an eighth of the worker.

Sending is marked on the chunk (`dispatched_at`) before the message goes, so the sweep can tell a chunk whose
message was lost (sent, never claimed, its job idle) from one that is simply not sent yet."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import count

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from labeling.exceptions import Conflict, DomainError, Forbidden
from labeling.models import Judge, ScoringChunk, ScoringJob
from labeling.services.projects import is_staff_user
from labeling.tasks import score_chunk_task

PRIORITY_MIN, PRIORITY_MAX = 1, 10
PRIORITY_DEFAULT = 1
PRIORITY_STAFF_ONLY = (f"Only staff can give a job a priority above {PRIORITY_DEFAULT}: a higher priority takes "
                       f"workers from the other projects. A project admin may set {PRIORITY_DEFAULT}.")


class PriorityError(DomainError):
    """A priority that is not a whole number from 1 to 10."""


class PriorityJobFinished(Conflict, PriorityError):
    """A priority asked of a job that no longer runs."""


class PriorityForbidden(Forbidden):
    """A priority above PRIORITY_DEFAULT asked by someone who is not staff."""


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


# How many of a job's short chunks may stand for one chunk of the share; and how many of its newest finished chunks
# tell how long its chunks take.
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


def time_scale(job: ScoringJob) -> int:
    """How many of the job's chunks stand for one chunk of its project's share: SCORING_CHUNK_SECONDS over the time
    its chunks take, from 1 (also before any is measured) to WINDOW_SCALE_MAX, so that jobs share the workers by
    time."""
    seconds = chunk_seconds(job)
    if not seconds or seconds <= 0:
        return 1
    return max(1, min(WINDOW_SCALE_MAX, round(settings.SCORING_CHUNK_SECONDS / seconds)))


@dataclass
class _JobShare:
    """A running job's place in its project's share while a dispatch fills it."""
    job_id: int
    priority: int
    cost: float  # the part of a chunk of the share one of its chunks takes: 1 / time_scale
    sent: int  # chunks sent and not yet written
    unsent: int
    turn: tuple  # when it was last sent a chunk, never first: equals take turns

    def behind(self) -> float:
        """How far one more chunk would take it into its part of the share (lowest goes first)."""
        return (self.sent + 1) * self.cost / self.priority


def _project_shares(*, job: ScoringJob, queue: str) -> list[_JobShare]:
    """The running jobs of the job's project whose chunks go to `queue`, with what each has sent."""
    jobs = (ScoringJob.objects.filter(project_id=job.project_id, status=ScoringJob.Status.RUNNING)
            .select_related("judge").order_by("id"))
    running = [other for other in jobs if bulk_queue_for(other.judge) == queue]
    rows = {row["job_id"]: row for row in ScoringChunk.objects.filter(job__in=running).values("job_id").annotate(
        sent=Count("id", filter=Q(finished_at__isnull=True, dispatched_at__isnull=False)),
        unsent=Count("id", filter=Q(finished_at__isnull=True, dispatched_at__isnull=True)),
        last=Max("dispatched_at"))}
    shares = []
    for other in running:
        row = rows.get(other.id, {"sent": 0, "unsent": 0, "last": None})
        shares.append(_JobShare(job_id=other.id, priority=other.priority, cost=1 / time_scale(other),
                                sent=row["sent"], unsent=row["unsent"],
                                turn=(0,) if row["last"] is None else (1, row["last"])))
    return shares


def _share_fill(shares: list[_JobShare]) -> dict[int, int]:
    """Job id -> how many more chunks it sends: the project's share is SCORING_WINDOW_CHUNKS x the highest priority
    among its running jobs, in chunks of the share (sent chunks count their cost); each next chunk goes to the job
    that would be least far into its part (its priority over the jobs' total), ties to the one sent to longest ago.
    No job holds more than SCORING_WINDOW_CHUNKS x its own priority: a share widened by another job's raised
    priority is that job's, and is not filled with the others' chunks, which the raised job's would wait behind."""
    if not shares:
        return {}
    budget = settings.SCORING_WINDOW_CHUNKS * max(share.priority for share in shares)
    used = sum(share.sent * share.cost for share in shares)
    turns = count()
    more: dict[int, int] = {}
    while True:
        # The tolerance keeps sixteen sixteenths of a chunk equal to one, which float sums need not be.
        open_shares = [share for share in shares if share.unsent and used + share.cost <= budget + 1e-9
                       and (share.sent + 1) * share.cost <= settings.SCORING_WINDOW_CHUNKS * share.priority + 1e-9]
        if not open_shares:
            return more
        share = min(open_shares, key=lambda s: (s.behind(), s.turn))
        share.sent, share.unsent, share.turn = share.sent + 1, share.unsent - 1, (2, next(turns))
        used += share.cost
        more[share.job_id] = more.get(share.job_id, 0) + 1


def scoring_dispatch(*, job: ScoringJob) -> list[int]:
    """Fill the share of the job's project on the job's queue (the job itself may have ended: its place goes to the
    project's other jobs): mark the chosen jobs' next unsent chunks (each job's in id order, the order it wants them
    scored) sent, and send them once the transaction commits. Returns the ids sent. Two callers at once cannot send a
    chunk twice: each chunk is marked by a conditional update (in id order, so two callers never wait on each other
    in a cycle), and only the caller whose update took it sends it. Two at once may together send a chunk or two
    beyond the share; the dispatches after them send that much less."""
    queue = bulk_queue_for(job.judge)
    more = _share_fill(_project_shares(job=job, queue=queue))
    candidates = sorted(
        chunk_id for job_id, n in more.items()
        for chunk_id in ScoringChunk.objects.filter(job_id=job_id, finished_at__isnull=True, dispatched_at__isnull=True)
        .order_by("id").values_list("id", flat=True)[:n]
    )
    now = timezone.now()
    sent = [chunk_id for chunk_id in candidates
            if ScoringChunk.objects.filter(id=chunk_id, dispatched_at__isnull=True).update(dispatched_at=now)]
    if sent:
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


def priority_max_for(user: AbstractBaseUser | None) -> int:
    """The highest priority `user` may give a job: PRIORITY_MAX for active staff and superusers, and for the
    operator's own commands (no user); PRIORITY_DEFAULT for everyone else, project admins included."""
    if user is None or is_staff_user(user):
        return PRIORITY_MAX
    return PRIORITY_DEFAULT


def priority_require(*, priority: object, by: AbstractBaseUser | None) -> None:
    """The one rule for who may set which priority, for every interface: PriorityError when `priority` is not a
    whole number from 1 to 10, PriorityForbidden (403) when it is above what `by` may set (priority_max_for)."""
    priority_check(priority)
    if priority > priority_max_for(by):
        raise PriorityForbidden(PRIORITY_STAFF_ONLY)


@transaction.atomic
def scoring_job_priority_set(*, job: ScoringJob, priority: int, by: AbstractBaseUser | None) -> ScoringJob:
    """Give a running job another part of its project's share (above 1, and so a wider share for its project, only
    for staff: priority_require): a higher priority sends more of its chunks at once; a lower one lets its sent
    chunks run and sends fewer after them."""
    priority_require(priority=priority, by=by)
    locked = ScoringJob.objects.select_for_update().select_related("judge").get(id=job.id)
    if locked.status != ScoringJob.Status.RUNNING:
        raise PriorityJobFinished(f"job {job.id} is {locked.status}: only a running job's priority can change")
    locked.priority = priority
    locked.save(update_fields=["priority"])
    scoring_dispatch(job=locked)
    return locked
