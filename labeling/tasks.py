"""Celery tasks: thin wrappers that take ids and call a service. Each kind of background work has one task, declared
by its kind (labeling/job_kinds.py: retries, time limit) and run through _run_job: the kind's `<kind>_run` service,
retried on transient errors, then its `<kind>_fail` service with the error. The sweep
(labeling/services/job_sweep.py) gives up what lost its worker. The task names are what queued messages and
settings.CELERY_TASK_ROUTES name: they stay."""
from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready
from django.db import OperationalError

from labeling.job_kinds import (
    AUDIT,
    BUNDLE_IMPORT,
    DRAFT,
    ESTIMATE,
    FINETUNE,
    QUERY_GENERATION,
    REPLAY,
    RETRIEVAL,
    ROUND,
    SCORING,
    SYSTEMS,
    VALIDATION,
    JobKind,
)
from labeling.models import MAX_ERROR_CHARS
from models_llm.backends import TransientScoringError

logger = logging.getLogger(__name__)
# Each task stops softly at its kind's time limit (the sweep holds the same limit on any pool) and is killed this much
# later if it does not.
HARD_GRACE_SECONDS = 60


def _job_task(kind: JobKind):
    """The Celery task of `kind`: acknowledged once it ends (a redelivery runs it again; its services are
    idempotent), retried as its kind says, stopped softly at its kind's time limit."""
    limit = kind.time_limit
    return shared_task(bind=True, acks_late=True, reject_on_worker_lost=kind.reject_on_worker_lost,
                       max_retries=kind.max_retries, soft_time_limit=limit, time_limit=limit + HARD_GRACE_SECONDS)


@_job_task(VALIDATION)
def validation_refresh_task(self, project_id: int) -> None:
    """Queue the scoring of new gold pairs and recompute a project's cached validation report (a no-op when it is
    already up to date)."""
    _run_job(self, VALIDATION, project_id)


@_job_task(SYSTEMS)
def systems_refresh_task(self, result_id: int) -> None:
    """Compute the Systems page's evaluation for one choice of sources and options (a no-op when it is already
    up to date)."""
    _run_job(self, SYSTEMS, result_id)


@_job_task(ROUND)
def round_finish_task(self, round_id: int) -> None:
    """Measure a labelling round whose batch is in, and refit its judge's calibrator."""
    _run_job(self, ROUND, round_id)


# A chunk that keeps failing marks its pairs failed and its job goes on. Its worker's name tells this delivery's
# claim from another's.
@_job_task(SCORING)
def score_chunk_task(self, chunk_id: int) -> None:
    """Score one chunk; transient errors are retried with backoff, and a chunk that keeps failing marks its
    pairs failed so the job goes on."""
    from labeling.services.scoring_chunks import worker_name  # a task imports its service

    _run_job(self, SCORING, chunk_id, worker=worker_name(self.request.id))


@_job_task(ESTIMATE)
def estimate_task(self, estimate_id: int) -> None:
    """Make an estimate of a scoring, retrieval or fine-tuning job (a model may be loaded and timed) within its time
    limit, on the queue the estimated job would run on (its request names it)."""
    _run_job(self, ESTIMATE, estimate_id)


@shared_task(ignore_result=True)
def jobs_sweep_task() -> None:
    """Celery beat, every JOB_SWEEP_SECONDS: give up (or go on with) the jobs whose worker was lost or that ran past
    their time limit, and queue again the scoring chunks that lost their worker."""
    from labeling.services.job_sweep import jobs_sweep  # a task imports its service

    jobs_sweep()


@worker_ready.connect
def _scratch_sweep_on_start(**_: object) -> None:
    """A worker starting on a machine removes the scratch folders that killed workers left there."""
    from labeling.services.job_sweep import scratch_sweep  # a task imports its service

    scratch_sweep()


@_job_task(DRAFT)
def definition_draft_task(self, draft_id: int) -> None:
    """Ask a judge for a drafted definition; transient errors are retried with backoff, and a draft that keeps
    failing stores the error (a finished draft is never asked again)."""
    _run_job(self, DRAFT, draft_id)


@_job_task(RETRIEVAL)
def retrieval_task(self, job_id: int) -> None:
    """Run a built-in retriever's job and write its run; transient errors are retried with backoff, and a job that
    keeps failing stores the error (no run is written)."""
    _run_job(self, RETRIEVAL, job_id)


# A bundle whose worker died is taken again (reject_on_worker_lost), and given up once it has killed
# bundle_upload.MAX_ATTEMPTS workers (its row counts the attempts), so it cannot come back forever.
@_job_task(BUNDLE_IMPORT)
def bundle_import_task(self, job_id: int) -> None:
    """Unpack an uploaded bundle archive and import it; transient errors are retried with backoff, and a job that
    keeps failing stores the error (nothing imported). The upload is removed from the storage when the job ends."""
    _run_job(self, BUNDLE_IMPORT, job_id)


# A dead worker's job is taken again by finetune_resume (the page, `finetune_judge --resume`, the sweep) once its
# heartbeat is stale, and the next worker goes on from the last checkpoint in storage.
@_job_task(FINETUNE)
def finetune_task(self, job_id: int) -> None:
    """Fine-tune a student on a worker; transient errors are retried with backoff, and a job that keeps failing
    stores the error (no adapter, no judge)."""
    _run_job(self, FINETUNE, job_id)


# An audit whose worker died stays running until the sweep gives it up; starting the audit again makes a new one.
@_job_task(AUDIT)
def audit_task(self, job_id: int) -> None:
    """Run a robustness audit of a judge; transient errors are retried with backoff (the audit starts over), and an
    audit that keeps failing stores the error (no report)."""
    _run_job(self, AUDIT, job_id)


# The sweep gives up a job whose worker stopped beating; what it wrote stays, and a new job of the same passages
# skips those units.
@_job_task(QUERY_GENERATION)
def query_generation_task(self, job_id: int) -> None:
    """Generate a query set with a judge's LLM (DisastIR 3.4); transient errors are retried with backoff (the job
    goes on from the last unit it wrote), and a job that keeps failing stores the error."""
    _run_job(self, QUERY_GENERATION, job_id)


# A replay whose worker was lost is queued again by the sweep (replay_resume) and goes on from the next run.
@_job_task(REPLAY)
def replay_task(self, job_id: int) -> None:
    """Replay the labelling loop on a project whose truth is known (#50); transient errors are retried, and a replay
    that keeps failing stores the error (the runs it stored stay)."""
    _run_job(self, REPLAY, job_id)


def _run_job(task, kind: JobKind, row_id: int, **also: object) -> None:
    """The one way a task runs background work: the kind's `run(**{kind.key: row_id}, **also)`; a transient error is
    retried with backoff (10 s doubling, at most 5 min) until the task's retries are spent, and then, like any other
    error, recorded with its `fail(..., error="Type: message")` (MAX_ERROR_CHARS at most)."""
    ids = {kind.key: row_id, **also}
    try:
        kind.service("run")(**ids)
    except SoftTimeLimitExceeded:
        # Past the kind's time limit (prefork pools only): no retry, the job has had its time.
        kind.service("fail")(**ids, error=f"ran longer than its time limit of {task.soft_time_limit:,} s; stopped")
    except Exception as exc:
        if task.request.retries < task.max_retries and _transient(exc):
            raise task.retry(exc=exc, countdown=min(300, 10 * 2**task.request.retries)) from exc
        error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        logger.warning("%s %s gave up: %s", task.name, ids, error, exc_info=exc)
        kind.service("fail")(**ids, error=error)


def _transient(exc: Exception) -> bool:
    return isinstance(exc, TransientScoringError | OperationalError | ConnectionError | TimeoutError)
