"""Scoring chunks: the pairs of one query that one task scores. A worker claims a chunk before any model call
and writes it part by part, once (a redelivered or resumed chunk writes nothing twice); a chunk that keeps
failing marks its pairs failed and its job goes on; a chunk whose worker was lost is swept back. Jobs are
started in labeling/services/scoring.py."""
from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from labeling.llm_adapter import judge_device, judge_method
from labeling.models import Judgment, Pair, RelevanceDefinition, ScoringChunk, ScoringJob
from labeling.selectors.definitions import current_definition
from labeling.selectors.scoring import job_last_moved
from labeling.services.jobs import job_attempt
from labeling.services.judging import Usage, judge_pairs, judgments_upsert
from labeling.services.rounds_wake import round_wake
from labeling.services.scoring_dispatch import scoring_dispatch, scoring_resend
from labeling.services.validation import validation_request
from models_llm.types import Verdict

logger = logging.getLogger(__name__)
# Judges this process has scored a part with (their model is loaded): the parts it times.
_warm_judges: set[tuple] = set()


def worker_name(task_id: str | None = None) -> str:
    """Who claims a chunk: this machine, process and task delivery."""
    return f"{socket.gethostname()}:{os.getpid()}:{task_id or 'direct'}"


def _stale_before() -> datetime:
    return timezone.now() - timedelta(seconds=settings.SCORING_STALL_SECONDS)


def _take_back(chunk: ScoringChunk) -> str | None:
    """Release a chunk whose worker was lost (on a locked row): its in-flight pairs count as lost calls. Returns
    the reason to fail it when it has now lost its worker SCORING_CHUNK_MAX_ATTEMPTS times, else None."""
    chunk.lost_workers += 1
    chunk.lost_calls += chunk.in_flight
    chunk.in_flight = 0
    chunk.claimed_by, chunk.claimed_at = "", None
    chunk.save(update_fields=["lost_workers", "lost_calls", "in_flight", "claimed_by", "claimed_at"])
    if chunk.lost_workers >= settings.SCORING_CHUNK_MAX_ATTEMPTS:
        return (f"the chunk lost its worker {chunk.lost_workers} times (killed, out of memory or stopped); "
                "given up (SCORING_CHUNK_MAX_ATTEMPTS)")
    return None


def _chunk_claim(*, chunk_id: int, worker: str) -> ScoringChunk | None:
    """Claim the chunk for `worker` before any model is called; None when it is written already, its job no
    longer runs, or another worker holds it and still shows signs of life. A claim that stopped moving is taken
    back (and the chunk failed when that has happened too often)."""
    with transaction.atomic():
        chunk = (ScoringChunk.objects.select_for_update().select_related("job__judge", "job__project")
                 .filter(id=chunk_id).first())
        if chunk is None or chunk.finished_at is not None or chunk.job.status != ScoringJob.Status.RUNNING:
            return None
        give_up = None
        if chunk.claimed_by and chunk.claimed_by != worker:
            if chunk.claimed_at is not None and chunk.claimed_at >= _stale_before():
                return None
            give_up = _take_back(chunk)
        if give_up is None:
            chunk.attempts += 1
            chunk.lost_calls += chunk.in_flight  # this worker's own earlier attempt, cut short
            chunk.in_flight = 0
            chunk.claimed_by, chunk.claimed_at = worker, timezone.now()
            chunk.save(update_fields=["attempts", "lost_calls", "in_flight", "claimed_by", "claimed_at"])
            # Each claim is an attempt at the job: the first one starts it.
            job_attempt(ScoringJob.objects.filter(id=chunk.job_id, status=ScoringJob.Status.RUNNING),
                        now=chunk.claimed_at)
            return chunk
    scoring_chunk_fail(chunk_id=chunk_id, error=give_up, worker=None)
    return None


def scoring_chunk_run(*, chunk_id: int, worker: str | None = None) -> int:
    """Claim one chunk, score it part by part (SCORING_WRITE_PAIRS pairs) and write each part as it comes, so a
    killed worker loses at most one part and a resumed chunk starts where it stopped. Returns the pairs written
    by this call (0 when the chunk is written already, its job stopped, or another worker holds it). Scoring
    errors propagate for the task to retry."""
    worker = worker or worker_name()
    chunk = _chunk_claim(chunk_id=chunk_id, worker=worker)
    if chunk is None:
        return 0
    definition = current_definition(query=chunk.query_id)
    step = max(1, settings.SCORING_WRITE_PAIRS)
    written = 0
    for start in range(chunk.written, chunk.size, step):
        part = chunk.pair_ids[start:start + step]
        # The claim moves and the part is marked in flight before the model sees it; a lost claim stops here.
        moved = ScoringChunk.objects.filter(id=chunk.id, claimed_by=worker, finished_at__isnull=True,
                                            job__status=ScoringJob.Status.RUNNING).update(
            claimed_at=timezone.now(), in_flight=len(part))
        if not moved:
            return written
        pairs = list(Pair.objects.filter(id__in=part).select_related("query", "passage").order_by("id"))
        began = time.perf_counter()
        verdicts, usage = judge_pairs(judge=chunk.job.judge, pairs=pairs, definitions={chunk.query_id: definition})
        # A process's first part for a judge also loads its model: the measured throughput counts the parts after.
        warm = (chunk.job.judge_id, chunk.job.judge.created_at)  # ids can come back after a delete: not alone
        seconds = time.perf_counter() - began if warm in _warm_judges else None
        _warm_judges.add(warm)
        if not _part_write(chunk=chunk, worker=worker, start=start, definition=definition, verdicts=verdicts,
                           usage=usage, error="", seconds=seconds):
            return written
        written += len(part)
    return written


def scoring_chunk_fail(*, chunk_id: int, error: str, worker: str | None = None) -> int:
    """Give up on a chunk (its retries are spent, or it lost its worker too often): its unwritten pairs get
    `failed` judgments carrying the error (an ok judgment already stored is kept), and the job goes on. With a
    `worker`, only while that worker still holds the chunk."""
    chunk = ScoringChunk.objects.select_related("job__judge", "job__project").filter(id=chunk_id).first()
    if chunk is None or chunk.finished_at is not None:
        return 0
    logger.warning("scoring chunk %s of job %s failed: %s", chunk.id, chunk.job_id, error)
    definition = current_definition(query=chunk.query_id)
    method = judge_method(chunk.job.judge)
    rest = chunk.pair_ids[chunk.written:]
    verdicts = [Verdict(pair_id=pid, status="failed", method=method, error=error) for pid in rest]
    written = _part_write(chunk=chunk, worker=worker, start=chunk.written, definition=definition, verdicts=verdicts,
                          usage=Usage(), error=error)
    return len(verdicts) if written else 0


@transaction.atomic
def _part_write(*, chunk: ScoringChunk, worker: str | None, start: int, definition: RelevanceDefinition | None,
                verdicts: list[Verdict], usage: Usage, error: str, seconds: float | None = None) -> bool:
    """Write the verdicts of pair_ids[start:start + len(verdicts)] and the part's usage, once: False (nothing
    written) when the chunk is finished, has moved past `start`, or (with a `worker`) is no longer its. `seconds`:
    what the model took for the part, for the judge's measured throughput (None: not a fair measure)."""
    locked = ScoringChunk.objects.select_for_update().get(id=chunk.id)
    if locked.finished_at is not None or locked.written != start or (worker and locked.claimed_by != worker):
        return False  # another worker wrote this part, or took the chunk over while this one was scoring
    now = timezone.now()
    ids = [verdict.pair_id for verdict in verdicts]
    pairs = list(Pair.objects.filter(id__in=ids).only("id", "query_id"))
    judgments_upsert(judge=chunk.job.judge, pairs=pairs, definitions={chunk.query_id: definition}, verdicts=verdicts)
    locked.written = start + len(verdicts)
    locked.failed_pairs += sum(v.status == Judgment.Status.FAILED for v in verdicts)
    locked.calls += usage.calls
    locked.prompt_tokens += usage.prompt_tokens
    locked.completion_tokens += usage.completion_tokens
    if error:
        locked.lost_calls += locked.in_flight
    locked.in_flight = 0
    locked.claimed_at = now
    fields = ["written", "failed_pairs", "calls", "prompt_tokens", "completion_tokens", "in_flight", "lost_calls",
              "claimed_at"]
    if seconds is not None:
        locked.busy_seconds += seconds
        locked.timed_pairs += len(verdicts)
        locked.device = judge_device(chunk.job.judge)
        fields += ["busy_seconds", "timed_pairs", "device"]
    finished = locked.written >= locked.size
    if finished:
        locked.finished_at, locked.failed, locked.error = now, bool(error), error
        fields += ["finished_at", "failed", "error"]
    locked.save(update_fields=fields)
    job = ScoringJob.objects.select_for_update().get(id=chunk.job_id)
    job.first_result_at = job.first_result_at or now
    if finished:
        job.done += locked.size
        job.failed += locked.failed_pairs
        if error:
            job.error = error
        if job.status == ScoringJob.Status.RUNNING and not job.chunks.filter(finished_at__isnull=True).exists():
            job.status, job.finished_at = ScoringJob.Status.DONE, now
    job.save(update_fields=["done", "failed", "first_result_at", "error", "status", "finished_at"])
    if finished:
        job.judge = chunk.job.judge
        scoring_dispatch(job=job)  # the chunk's place in the window goes to the job's next chunk
        validation_request(project=chunk.job.project)
        if job.status == ScoringJob.Status.DONE:
            round_wake(judge_id=job.judge_id)  # a round waiting for this retrained student to score the pool
    return True


@dataclass(frozen=True)
class SweepResult:
    requeued: list[int]
    failed: list[int]


def scoring_sweep() -> SweepResult:
    """Bring back what lost its worker, for Celery beat: in running jobs, a claimed chunk whose claim has not
    moved for SCORING_STALL_SECONDS is released and queued again (or failed, when it has lost its worker
    SCORING_CHUNK_MAX_ATTEMPTS times); in a job with no sign of progress for that long, the chunks sent and never
    claimed are queued again too (their messages may have gone with a worker). A second delivery of a chunk some
    worker still holds is skipped, so queuing again never scores twice."""
    stale = _stale_before()
    requeued: list[int] = []
    failed: list[int] = []
    for job in ScoringJob.objects.filter(status=ScoringJob.Status.RUNNING, created_at__lt=stale).select_related("judge"):
        open_chunks = job.chunks.filter(finished_at__isnull=True)
        idle = job_last_moved(job) < stale
        before = len(requeued)
        for chunk_id in open_chunks.filter(claimed_at__lt=stale).values_list("id", flat=True):
            with transaction.atomic():
                chunk = ScoringChunk.objects.select_for_update().get(id=chunk_id)
                if chunk.finished_at is not None or chunk.claimed_at is None or chunk.claimed_at >= stale:
                    continue
                give_up = _take_back(chunk)
            if give_up:
                scoring_chunk_fail(chunk_id=chunk_id, error=give_up)
                failed.append(chunk_id)
            else:
                requeued.append(chunk_id)
        if idle:
            # Sent over SCORING_STALL_SECONDS ago (or sent again), never claimed, and the job has not moved: their
            # messages may have gone with a worker. At most once per stall time, so a long queue does not grow.
            requeued += list(open_chunks.filter(claimed_at__isnull=True, dispatched_at__lt=stale)
                             .exclude(id__in=requeued).values_list("id", flat=True))
        scoring_resend(job=job, chunk_ids=sorted(set(requeued[before:])))
    if requeued or failed:
        logger.info("scoring sweep: %d chunk(s) queued again, %d given up", len(set(requeued)), len(failed))
    return SweepResult(requeued=sorted(set(requeued)), failed=failed)
