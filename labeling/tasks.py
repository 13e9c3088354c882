"""Celery tasks: thin wrappers that take ids and call a service. Background work runs through _run_job: the
kind's `<kind>_run` service, retried on transient errors, then its `<kind>_fail` service with the error. Every
task has its kind's time limit; the sweep (labeling/services/job_sweep.py) gives up what lost its worker."""
from __future__ import annotations

import logging
from collections.abc import Callable

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready
from django.conf import settings
from django.db import OperationalError

from labeling.models import MAX_ERROR_CHARS
from models_llm.backends import TransientScoringError

logger = logging.getLogger(__name__)
# Each task stops softly at its kind's time limit (the settings named below; the sweep holds the same limit on any
# pool) and is killed this much later if it does not.
HARD_GRACE_SECONDS = 60


def _time_limits(setting: str) -> dict[str, int]:
    limit = getattr(settings, setting)
    return {"soft_time_limit": limit, "time_limit": limit + HARD_GRACE_SECONDS}



@shared_task(bind=True, acks_late=True, max_retries=2, **_time_limits("VALIDATION_TIME_LIMIT"))
def validation_refresh_task(self, project_id: int) -> None:
    """Queue the scoring of new gold pairs and recompute a project's cached validation report (a no-op when it is
    already up to date)."""
    from labeling.services.gold_scoring import validation_refresh_scoring_gold  # a task imports its service
    from labeling.services.validation import validation_refresh_fail  # a task imports its service

    _run_job(self, validation_refresh_scoring_gold, validation_refresh_fail, project_id=project_id)


@shared_task(bind=True, acks_late=True, max_retries=2, **_time_limits("SYSTEMS_TIME_LIMIT"))
def systems_refresh_task(self, result_id: int) -> None:
    """Compute the Systems page's evaluation for one choice of sources and options (a no-op when it is already
    up to date)."""
    from labeling.services.systems_cache import systems_refresh, systems_refresh_fail  # a task imports its service

    _run_job(self, systems_refresh, systems_refresh_fail, result_id=result_id)


@shared_task(bind=True, acks_late=True, max_retries=2, **_time_limits("ROUND_TIME_LIMIT"))
def round_finish_task(self, round_id: int) -> None:
    """Measure a labelling round whose batch is in, and refit its judge's calibrator."""
    from labeling.services.rounds import round_fail, round_finish  # a task imports its service

    _run_job(self, round_finish, round_fail, round_id=round_id)


# Not reject_on_worker_lost: a chunk that kills its worker would come straight back, forever, paying its model
# each time. The message is dropped instead, and the sweep below brings the chunk back (a bounded number of times).
@shared_task(bind=True, acks_late=True, max_retries=3, **_time_limits("SCORING_TIME_LIMIT"))
def score_chunk_task(self, chunk_id: int) -> None:
    """Score one chunk; transient errors are retried with backoff, and a chunk that keeps failing marks its
    pairs failed so the job goes on."""
    from labeling.services.scoring_chunks import scoring_chunk_fail, scoring_chunk_run, worker_name  # its service

    _run_job(self, scoring_chunk_run, scoring_chunk_fail, chunk_id=chunk_id, worker=worker_name(self.request.id))


@shared_task(bind=True, acks_late=True, max_retries=2, **_time_limits("ESTIMATE_TIME_LIMIT"))
def estimate_task(self, estimate_id: int) -> None:
    """Make an estimate of a scoring, retrieval or fine-tuning job (a model may be loaded and timed) within its time
    limit, on the queue the estimated job would run on (its request names it)."""
    from labeling.services.estimates import estimate_fail, estimate_run  # a task imports its service

    _run_job(self, estimate_run, estimate_fail, estimate_id=estimate_id)


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


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=3,
             **_time_limits("DRAFT_TIME_LIMIT"))
def definition_draft_task(self, draft_id: int) -> None:
    """Ask a judge for a drafted definition; transient errors are retried with backoff, and a draft that keeps
    failing stores the error (a finished draft is never asked again)."""
    from labeling.services.drafting import definition_draft_fail, definition_draft_run  # a task imports its service

    _run_job(self, definition_draft_run, definition_draft_fail, draft_id=draft_id)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=2,
             **_time_limits("RETRIEVAL_TIME_LIMIT"))
def retrieval_task(self, job_id: int) -> None:
    """Run a built-in retriever's job and write its run; transient errors are retried with backoff, and a job that
    keeps failing stores the error (no run is written)."""
    from labeling.services.retrieval import retrieval_fail, retrieval_run  # a task imports its service

    _run_job(self, retrieval_run, retrieval_fail, job_id=job_id)


# reject_on_worker_lost: a bundle whose worker died is taken again, and given up once it has killed
# bundle_upload.MAX_ATTEMPTS workers (its row counts the attempts), so it cannot come back forever.
@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=2,
             **_time_limits("BUNDLE_IMPORT_TIME_LIMIT"))
def bundle_import_task(self, job_id: int) -> None:
    """Unpack an uploaded bundle archive and import it; transient errors are retried with backoff, and a job that
    keeps failing stores the error (nothing imported). The upload is removed from the storage when the job ends."""
    from labeling.services.bundle_upload import bundle_import_fail, bundle_import_run  # a task imports its service

    _run_job(self, bundle_import_run, bundle_import_fail, job_id=job_id)


# Not reject_on_worker_lost: a job that kills its worker (memory) would come straight back, forever. A dead worker's
# job is taken again by finetune_resume (the page, `finetune_judge --resume`) once its heartbeat is stale, and the
# next worker goes on from the last checkpoint in storage.
@shared_task(bind=True, acks_late=True, max_retries=2, **_time_limits("FINETUNE_TIME_LIMIT"))
def finetune_task(self, job_id: int) -> None:
    """Fine-tune a student on a worker; transient errors are retried with backoff, and a job that keeps failing
    stores the error (no adapter, no judge)."""
    from labeling.services.finetune import finetune_fail, finetune_run  # a task imports its service

    _run_job(self, finetune_run, finetune_fail, job_id=job_id)


# Not reject_on_worker_lost: an audit that kills its worker (a long padded prompt on a small machine) would come
# straight back, forever. Its job row stays running; starting the audit again makes a new one.
@shared_task(bind=True, acks_late=True, max_retries=2, **_time_limits("AUDIT_TIME_LIMIT"))
def audit_task(self, job_id: int) -> None:
    """Run a robustness audit of a judge; transient errors are retried with backoff (the audit starts over), and an
    audit that keeps failing stores the error (no report)."""
    from labeling.services.audit import audit_fail, audit_run  # a task imports its service

    _run_job(self, audit_run, audit_fail, job_id=job_id)


# Not reject_on_worker_lost: a generation that kills its worker would come straight back, forever. The sweep gives
# up a job whose worker stopped beating; what it wrote stays, and a new job of the same passages skips those units.
@shared_task(bind=True, acks_late=True, max_retries=2, **_time_limits("QUERY_GENERATION_TIME_LIMIT"))
def query_generation_task(self, job_id: int) -> None:
    """Generate a query set with a judge's LLM (DisastIR 3.4); transient errors are retried with backoff (the job
    goes on from the last unit it wrote), and a job that keeps failing stores the error."""
    # a task imports its service
    from labeling.services.query_generation import query_generation_fail, query_generation_run

    _run_job(self, query_generation_run, query_generation_fail, job_id=job_id)


def _run_job(task, run: Callable[..., object], fail: Callable[..., object], **ids: object) -> None:
    """The one way a task runs background work: `run(**ids)`; a transient error is retried with backoff (10 s
    doubling, at most 5 min) until the task's retries are spent, and then, like any other error, recorded with
    `fail(**ids, error="Type: message")` (MAX_ERROR_CHARS at most)."""
    try:
        run(**ids)
    except SoftTimeLimitExceeded:
        # Past the kind's time limit (prefork pools only): no retry, the job has had its time.
        fail(**ids, error=f"ran longer than its time limit of {task.soft_time_limit:,} s; stopped")
    except Exception as exc:
        if task.request.retries < task.max_retries and _transient(exc):
            raise task.retry(exc=exc, countdown=min(300, 10 * 2**task.request.retries)) from exc
        error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        logger.warning("%s %s gave up: %s", task.name, ids, error, exc_info=exc)
        fail(**ids, error=error)


def _transient(exc: Exception) -> bool:
    return isinstance(exc, TransientScoringError | OperationalError | ConnectionError | TimeoutError)
