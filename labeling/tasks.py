"""Celery tasks: thin wrappers that take ids and call a service."""
from __future__ import annotations

from celery import shared_task


@shared_task(acks_late=True, max_retries=2, default_retry_delay=30)
def validation_refresh_task(project_id: int) -> None:
    """Recompute a project's cached validation report (a no-op when it is already up to date)."""
    from labeling.services.validation import validation_refresh

    validation_refresh(project_id=project_id)
