"""Celery tasks: thin wrappers that take ids and call a service."""
from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from models_llm.backends import TransientScoringError


@shared_task(acks_late=True, max_retries=2, default_retry_delay=30)
def validation_refresh_task(project_id: int) -> None:
    """Recompute a project's cached validation report (a no-op when it is already up to date)."""
    from labeling.services.validation import validation_refresh

    validation_refresh(project_id=project_id)


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=3)
def score_chunk_task(self, chunk_id: int) -> None:
    """Score one chunk; transient errors are retried with backoff, and a chunk that keeps failing marks its
    pairs failed so the job goes on."""
    from labeling.services.scoring import scoring_chunk_fail, scoring_chunk_run

    try:
        scoring_chunk_run(chunk_id=chunk_id)
    except Exception as exc:  # noqa: BLE001 - any error: retry, then record it on the pairs
        if self.request.retries < self.max_retries and _transient(exc):
            raise self.retry(exc=exc, countdown=min(300, 10 * 2**self.request.retries)) from exc
        scoring_chunk_fail(chunk_id=chunk_id, error=f"{type(exc).__name__}: {exc}"[:2000])


@shared_task(bind=True, acks_late=True, reject_on_worker_lost=True, max_retries=3)
def definition_draft_task(self, draft_id: int) -> None:
    """Ask a judge for a drafted definition; transient errors are retried with backoff, and a draft that keeps
    failing stores the error (a finished draft is never asked again)."""
    from labeling.services.drafting import definition_draft_fail, definition_draft_run

    try:
        definition_draft_run(draft_id=draft_id)
    except Exception as exc:  # noqa: BLE001 - any error: retry, then record it on the draft
        if self.request.retries < self.max_retries and _transient(exc):
            raise self.retry(exc=exc, countdown=min(300, 10 * 2**self.request.retries)) from exc
        definition_draft_fail(draft_id=draft_id, error=f"{type(exc).__name__}: {exc}"[:2000])


def _transient(exc: Exception) -> bool:
    return isinstance(exc, TransientScoringError | OperationalError | ConnectionError | TimeoutError)
