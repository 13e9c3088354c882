"""Scoring jobs: a judge over a project's pairs, split into chunks of one query's pairs that Celery workers
score independently. Chunks write in one transaction and once (a redelivered or resumed chunk writes nothing
twice); a chunk that keeps failing marks its pairs failed and the job goes on."""
from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from labeling.models import Judge, Judgment, Pair, Project, RelevanceDefinition, ScoringChunk, ScoringJob
from labeling.scoring import JudgeConfigError, judge_config, judgment_fields, pair_inputs, scorer_for
from labeling.services.validation import validation_request_refresh
from labeling.tasks import score_chunk_task
from models_llm.types import Verdict


class ScoringError(ValueError):
    """A job that cannot be started or changed as asked (bad judge configuration, unknown pair ids...)."""


def _current_definitions(query_ids: Sequence[int]) -> dict[int, RelevanceDefinition]:
    newest: dict[int, RelevanceDefinition] = {}
    for definition in RelevanceDefinition.objects.filter(query_id__in=query_ids, is_draft=False).order_by("query_id", "version"):
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
def scoring_job_create(
    *, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING, pair_ids: Sequence[int] | None = None,
    user=None, chunk_pairs: int | None = None,
) -> ScoringJob:
    """Start scoring `scope` of the project's pairs with `judge`; workers pick the chunks up once this
    commits. Scope `missing` (the default) skips pairs already judged under their query's current definition."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    if scope not in ScoringJob.Scope.values:
        raise ScoringError(f"scope must be one of {ScoringJob.Scope.values}, got {scope!r}")
    try:
        judge_config(judge)
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
    message lost); finished chunks are never redone. Returns the number of chunks queued."""
    if job.status != ScoringJob.Status.RUNNING:
        return 0
    chunk_ids = list(job.chunks.filter(finished_at__isnull=True).values_list("id", flat=True))
    transaction.on_commit(lambda: _enqueue(chunk_ids))
    return len(chunk_ids)


@transaction.atomic
def scoring_job_cancel(*, job: ScoringJob) -> ScoringJob:
    """Stop a running job: chunks not yet started are skipped; what was written stays."""
    ScoringJob.objects.filter(id=job.id, status=ScoringJob.Status.RUNNING).update(
        status=ScoringJob.Status.CANCELLED, finished_at=timezone.now()
    )
    job.refresh_from_db()
    return job


def scoring_chunk_run(*, chunk_id: int) -> int:
    """Score one chunk with its judge and write the judgments; returns the number of pairs written (0 when
    the chunk is finished already or its job no longer runs). Scoring errors propagate for the task to retry."""
    chunk = ScoringChunk.objects.select_related("job__judge", "job__project").filter(id=chunk_id).first()
    if chunk is None or chunk.finished_at is not None or chunk.job.status != ScoringJob.Status.RUNNING:
        return 0
    ScoringChunk.objects.filter(id=chunk.id).update(attempts=F("attempts") + 1)
    definition = _current_definitions([chunk.query_id]).get(chunk.query_id)
    pairs = list(Pair.objects.filter(id__in=chunk.pair_ids).select_related("query", "passage").order_by("id"))
    texts = {chunk.query_id: definition.text if definition else None}
    verdicts = scorer_for(chunk.job.judge).score(pair_inputs(pairs, texts))
    return _chunk_write(chunk=chunk, definition=definition, verdicts=verdicts, error="")


def scoring_chunk_fail(*, chunk_id: int, error: str) -> int:
    """Give up on a chunk after its retries: its pairs get `failed` judgments carrying the error (an ok
    judgment already stored is kept), and the job goes on."""
    chunk = ScoringChunk.objects.select_related("job__judge", "job__project").filter(id=chunk_id).first()
    if chunk is None or chunk.finished_at is not None:
        return 0
    definition = _current_definitions([chunk.query_id]).get(chunk.query_id)
    method = judge_config(chunk.job.judge).method
    verdicts = [Verdict(pair_id=pid, status="failed", method=method, error=error) for pid in chunk.pair_ids]
    return _chunk_write(chunk=chunk, definition=definition, verdicts=verdicts, error=error)


@transaction.atomic
def _chunk_write(*, chunk: ScoringChunk, definition: RelevanceDefinition | None, verdicts: list[Verdict],
                 error: str) -> int:
    locked = ScoringChunk.objects.select_for_update().get(id=chunk.id)
    if locked.finished_at is not None:
        return 0  # another worker wrote this chunk while this one was scoring
    judge, now = chunk.job.judge, timezone.now()
    existing = {
        j.pair_id: j
        for j in Judgment.objects.filter(judge=judge, pair_id__in=chunk.pair_ids, definition=definition)
    }
    create, update = [], []
    for verdict in verdicts:
        fields = judgment_fields(verdict)
        stored = existing.get(verdict.pair_id)
        if stored is None:
            create.append(Judgment(pair_id=verdict.pair_id, judge=judge, definition=definition, created_at=now,
                                   **fields))
        elif verdict.status == Judgment.Status.OK or stored.status != Judgment.Status.OK:
            # A failure never replaces an answer that was stored before.
            for name, value in fields.items():
                setattr(stored, name, value)
            stored.created_at = now
            update.append(stored)
    Judgment.objects.bulk_create(create)
    if update:
        Judgment.objects.bulk_update(update, [*judgment_fields(verdicts[0]), "created_at"])
    failed = sum(v.status == Judgment.Status.FAILED for v in verdicts)
    ScoringChunk.objects.filter(id=chunk.id).update(finished_at=now, failed=bool(error), error=error)
    job = ScoringJob.objects.select_for_update().get(id=chunk.job_id)
    job.done += len(verdicts)
    job.failed += failed
    job.first_result_at = job.first_result_at or now
    if error:
        job.last_error = error
    if job.status == ScoringJob.Status.RUNNING and not job.chunks.filter(finished_at__isnull=True).exists():
        job.status, job.finished_at = ScoringJob.Status.DONE, now
    job.save(update_fields=["done", "failed", "first_result_at", "last_error", "status", "finished_at"])
    validation_request_refresh(project=chunk.job.project)
    return len(verdicts)
