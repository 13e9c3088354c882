"""Scoring jobs: a judge over a project's pairs, split into chunks of one query's pairs that Celery workers
score independently. Chunks write in one transaction and once (a redelivered or resumed chunk writes nothing
twice); a chunk that keeps failing marks its pairs failed and the job goes on."""
from __future__ import annotations

import logging
import os
import random
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import groupby

from django.conf import settings
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.models import Judge, Judgment, Pair, Project, RelevanceDefinition, ScoringChunk, ScoringJob
from labeling.scoring import (
    JudgeConfigError,
    is_judges_ensemble,
    judge_check,
    judge_config,
    judge_method,
    pair_inputs,
)
from labeling.selectors.scoring import observed_answers
from labeling.services.judging import Usage, judge_pairs, judgments_upsert, query_intent
from labeling.services.validation import validation_request_refresh
from labeling.tasks import score_chunk_task
from models_llm.backends import ScorerConfigError
from models_llm.cost import TokenEstimate, diras_token_estimate
from models_llm.ensembles.cost import ensemble_token_estimate
from models_llm.types import Verdict


logger = logging.getLogger(__name__)


class ScoringError(DomainError):
    """A job that cannot be started or changed as asked (bad judge configuration, unknown pair ids...)."""


def _current_definitions(query_ids: Sequence[int]) -> dict[int, RelevanceDefinition]:
    newest: dict[int, RelevanceDefinition] = {}
    current = RelevanceDefinition.objects.in_use().filter(query_id__in=query_ids)
    for definition in current.order_by("query_id", "version"):
        newest[definition.query_id] = definition
    return newest


def _pairs_in_scope(*, project: Project, judge: Judge, scope: str, pair_ids: Sequence[int] | None) -> list[tuple]:
    """(query id, pair id) of the pairs the job scores, by query then pool order."""
    pairs = Pair.objects.filter(project=project)
    if scope == ScoringJob.Scope.SELECTION:
        if not pair_ids:
            raise ScoringError("a selection job needs pair ids")
        wanted = set(pair_ids)
        pairs = pairs.filter(id__in=wanted)
        found = set(pairs.values_list("id", flat=True))
        if found != wanted:
            missing = sorted(wanted - found)
            raise ScoringError(f"pairs {missing[:10]} are not in project {project.slug!r}"
                               + (f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""))
    rows = list(pairs.order_by("query_id", "id").values_list("query_id", "id"))
    if scope != ScoringJob.Scope.MISSING:
        return rows
    current = {qid: d.id for qid, d in _current_definitions({q for q, _ in rows}).items()}
    judged = {
        pair_id
        for pair_id, query_id, definition_id in Judgment.objects.filter(judge=judge, pair__project=project)
        .values_list("pair_id", "pair__query_id", "definition_id")
        .iterator(chunk_size=20_000)
        if definition_id == current.get(query_id)
    }
    return [(query_id, pair_id) for query_id, pair_id in rows if pair_id not in judged]


@transaction.atomic
def scoring_job_start(
    *, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING, pair_ids: Sequence[int] | None = None,
    user=None, chunk_pairs: int | None = None,
) -> tuple[ScoringJob, bool]:
    """Score `scope` of the project's pairs with `judge` on the workers: (job, created). The judge is locked, so
    two starts at once (two clicks, two API calls, the page and the CLI) never make two jobs: while the judge has
    a running job, that job is resumed (its unwritten chunks queued again) and returned with created False. A
    selection leaves out the pairs a running job of the judge has still to write. The one way to start a job."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    Judge.objects.select_for_update().filter(id=judge.id).first()
    running = ScoringJob.objects.filter(judge=judge, status=ScoringJob.Status.RUNNING).order_by("id")
    if scope == ScoringJob.Scope.SELECTION and pair_ids:
        queued = _queued_pair_ids(running)
        fresh = [pair_id for pair_id in pair_ids if pair_id not in queued]
        if fresh:
            return scoring_job_create(project=project, judge=judge, scope=scope, pair_ids=fresh, user=user,
                                      chunk_pairs=chunk_pairs), True
    job = running.first()
    if job is not None:
        scoring_job_resume(job=job)
        return job, False
    return scoring_job_create(project=project, judge=judge, scope=scope, pair_ids=pair_ids, user=user,
                              chunk_pairs=chunk_pairs), True


def _queued_pair_ids(jobs) -> set[int]:
    queued: set[int] = set()
    for ids, written in ScoringChunk.objects.filter(job__in=jobs, finished_at__isnull=True).values_list(
        "pair_ids", "written"
    ):
        queued.update(ids[written:])
    return queued


@transaction.atomic
def scoring_job_create(
    *, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING, pair_ids: Sequence[int] | None = None,
    user=None, chunk_pairs: int | None = None,
) -> ScoringJob:
    """A new job over `scope` of the project's pairs; workers pick the chunks up once this commits. Scope
    `missing` (the default) skips pairs already judged under their query's current definition. Interfaces
    call scoring_job_start, which never makes a second job for a judge that has one running."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    if scope not in ScoringJob.Scope.values:
        raise ScoringError(f"scope must be one of {ScoringJob.Scope.values}, got {scope!r}")
    try:
        judge_check(judge)
    except JudgeConfigError as exc:
        raise ScoringError(str(exc)) from None
    size = chunk_pairs or settings.SCORING_CHUNK_PAIRS
    rows = _pairs_in_scope(project=project, judge=judge, scope=scope, pair_ids=pair_ids)
    job = ScoringJob.objects.create(project=project, judge=judge, scope=scope, total=len(rows), created_by=user)
    chunks = []
    for query_id, group in groupby(rows, key=lambda row: row[0]):
        ids = [pair_id for _, pair_id in group]
        for start in range(0, len(ids), size):
            part = ids[start:start + size]
            chunks.append(ScoringChunk(job=job, query_id=query_id, pair_ids=part, size=len(part)))
    ScoringChunk.objects.bulk_create(chunks, batch_size=1000)
    if not chunks:
        ScoringJob.objects.filter(id=job.id).update(status=ScoringJob.Status.DONE, finished_at=timezone.now())
        job.refresh_from_db()
        return job
    chunk_ids = list(ScoringChunk.objects.filter(job=job).values_list("id", flat=True))
    transaction.on_commit(lambda: _enqueue(chunk_ids))
    return job


def _enqueue(chunk_ids: Sequence[int]) -> None:
    for chunk_id in chunk_ids:
        score_chunk_task.delay(chunk_id)


def scoring_job_resume(*, job: ScoringJob) -> int:
    """Queue again every chunk of a running job that has not been written (its worker was killed, its
    message lost); finished chunks are never redone, and a chunk a live worker holds is skipped by the second
    delivery. Returns the number of chunks queued."""
    if job.status != ScoringJob.Status.RUNNING:
        return 0
    chunk_ids = list(job.chunks.filter(finished_at__isnull=True).values_list("id", flat=True))
    transaction.on_commit(lambda: _enqueue(chunk_ids))
    return len(chunk_ids)


@transaction.atomic
def scoring_job_cancel(*, job: ScoringJob) -> ScoringJob:
    """Stop a running job: chunks not yet started are skipped, a chunk being scored stops at its next part;
    what was written stays."""
    ScoringJob.objects.filter(id=job.id, status=ScoringJob.Status.RUNNING).update(
        status=ScoringJob.Status.CANCELLED, finished_at=timezone.now()
    )
    job.refresh_from_db()
    return job


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
    definition = _current_definitions([chunk.query_id]).get(chunk.query_id)
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
        verdicts, usage = judge_pairs(judge=chunk.job.judge, pairs=pairs, definitions={chunk.query_id: definition})
        if not _part_write(chunk=chunk, worker=worker, start=start, definition=definition, verdicts=verdicts,
                           usage=usage, error=""):
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
    definition = _current_definitions([chunk.query_id]).get(chunk.query_id)
    method = judge_method(chunk.job.judge)
    rest = chunk.pair_ids[chunk.written:]
    verdicts = [Verdict(pair_id=pid, status="failed", method=method, error=error) for pid in rest]
    written = _part_write(chunk=chunk, worker=worker, start=chunk.written, definition=definition, verdicts=verdicts,
                          usage=Usage(), error=error)
    return len(verdicts) if written else 0


@transaction.atomic
def _part_write(*, chunk: ScoringChunk, worker: str | None, start: int, definition: RelevanceDefinition | None,
                verdicts: list[Verdict], usage: Usage, error: str) -> bool:
    """Write the verdicts of pair_ids[start:start + len(verdicts)] and the part's usage, once: False (nothing
    written) when the chunk is finished, has moved past `start`, or (with a `worker`) is no longer its."""
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
            job.last_error = error
        if job.status == ScoringJob.Status.RUNNING and not job.chunks.filter(finished_at__isnull=True).exists():
            job.status, job.finished_at = ScoringJob.Status.DONE, now
    job.save(update_fields=["done", "failed", "first_result_at", "last_error", "status", "finished_at"])
    if finished:
        validation_request_refresh(project=chunk.job.project)
    return True


@dataclass(frozen=True)
class SweepResult:
    requeued: list[int]
    failed: list[int]


def scoring_sweep() -> SweepResult:
    """Bring back what lost its worker, for Celery beat: in running jobs, a claimed chunk whose claim has not
    moved for SCORING_STALL_SECONDS is released and queued again (or failed, when it has lost its worker
    SCORING_CHUNK_MAX_ATTEMPTS times); in a job with no sign of progress for that long, the unclaimed chunks
    are queued again too (their messages may have gone with a worker). A second delivery of a chunk some
    worker still holds is skipped, so queuing again never scores twice."""
    stale = _stale_before()
    requeued: list[int] = []
    failed: list[int] = []
    for job in ScoringJob.objects.filter(status=ScoringJob.Status.RUNNING, created_at__lt=stale):
        open_chunks = job.chunks.filter(finished_at__isnull=True)
        last = open_chunks.aggregate(moved=Max("claimed_at"))["moved"]
        last_done = job.chunks.aggregate(done=Max("finished_at"))["done"]
        idle = max(filter(None, [last, last_done, job.created_at])) < stale
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
            requeued += list(open_chunks.filter(claimed_at__isnull=True).exclude(id__in=requeued)
                             .values_list("id", flat=True))
    if requeued:
        transaction.on_commit(lambda: _enqueue(sorted(set(requeued))))
    if requeued or failed:
        logger.info("scoring sweep: %d chunk(s) queued again, %d given up", len(set(requeued)), len(failed))
    return SweepResult(requeued=sorted(set(requeued)), failed=failed)


ESTIMATE_SAMPLE = 200


@dataclass(frozen=True)
class JobEstimate:
    """A dry run: what a job would send to the judge's model, priced when the judge has prices."""

    judge: Judge
    scope: str
    tokens: TokenEstimate
    cost_usd: float | None
    # DisastIR labelled 1.34M pairs with GPT-4o-mini for about $1,400: our prompts at its prices, same count.
    reference_pairs: int = 1_340_000
    reference_cost_usd: float | None = None
    observed_pairs: int = 0  # ensemble: answers of this judge the estimate learnt from (0: typical values)


# GPT-4o-mini's list prices (USD per million tokens) when DisastIR ran, for the comparison line.
GPT_4O_MINI_PRICES = (0.15, 0.60)


def scoring_job_estimate(
    *, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING, pair_ids: Sequence[int] | None = None,
    sample: int = ESTIMATE_SAMPLE,
) -> JobEstimate:
    """Estimate the calls and tokens of scoring `scope` with a generative judge, before starting it: prompts
    of a random sample of the pairs (fixed seed) are built and counted with the judge's tokenizer (hf) or from
    their characters (openai); answers take typical lengths. Nothing is sent to a model and nothing is stored."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    if is_judges_ensemble(judge):
        raise ScoringError(f"judge {judge.name!r} is a judges ensemble: estimate each of its members")
    try:
        config = judge_config(judge)
    except JudgeConfigError as exc:
        raise ScoringError(str(exc)) from None
    if config.backend == "embedding":
        raise ScoringError(f"judge {judge.name!r} is an embedding judge: it sends no prompts and costs no tokens")
    rows = _pairs_in_scope(project=project, judge=judge, scope=scope, pair_ids=pair_ids)
    chosen = sorted(random.Random(0).sample([pair_id for _, pair_id in rows], min(sample, len(rows))))
    pairs = list(Pair.objects.filter(id__in=chosen).select_related("query", "passage").order_by("id"))
    definitions = _current_definitions({pair.query_id for pair in pairs})
    texts = {query_id: d.text for query_id, d in definitions.items()}
    inputs = pair_inputs(pairs, texts)
    count = None
    if config.backend == "hf":
        from models_llm.backends.hf import chat_token_counter  # torch and transformers load lazily

        try:
            count = chat_token_counter(config.model)
        except ScorerConfigError as exc:
            raise ScoringError(str(exc)) from None
    observed = None
    if config.method == "ensemble":
        # A judge that has answered before (a pilot run) is estimated by how it answered: how far its strategies
        # got before an answer did not parse, and how long its answers were.
        observed = observed_answers(judge)
        tokens = ensemble_token_estimate(
            [(pair_input, query_intent(pair)) for pair, pair_input in zip(pairs, inputs, strict=True)],
            total_pairs=len(rows), strategies=config.strategies, count_tokens=count,
            max_new_tokens=config.max_new_tokens,
            completion=observed.completion if observed else None, reach=observed.reach if observed else None,
        )
    else:
        tokens = diras_token_estimate(inputs, config=config, total_pairs=len(rows), count_tokens=count)
    return JobEstimate(
        judge=judge, scope=scope, tokens=tokens, cost_usd=tokens.cost(judge.price_in, judge.price_out),
        reference_cost_usd=tokens.cost(*GPT_4O_MINI_PRICES, pairs=JobEstimate.reference_pairs),
        observed_pairs=observed.pairs if observed else 0,
    )
