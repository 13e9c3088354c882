"""The Systems page's cached evaluation, written (#34): asked for (debounced: one computation queued at a time per
choice, at most one per SYSTEMS_REFRESH_MIN_SECONDS after the last), computed by a worker with its progress, stored
as a signed file of the storage. Projects whose runs are small are evaluated within the request instead, never
cached. Reads and the computation itself are labeling.selectors.systems_cache."""
from __future__ import annotations

import pickle
import uuid
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from labeling.models import Project, SystemsResult
from labeling.selectors.systems_cache import (
    SystemsBundle,
    SystemsChoice,
    bundle_digest,
    systems_bundle_compute,
    systems_inputs,
    systems_steps,
)
from labeling.services.jobs import (
    REFRESH_PENDING_AGAIN,
    job_fail,
    job_heartbeat,
    job_take,
    refresh_countdown,
    refresh_none_pending,
)
from labeling.tasks import systems_refresh_task

STORE_PREFIX = "systems/"
# Results kept per project (each choice of sources and options is one): the oldest beyond these are removed.
KEEP_PER_PROJECT = 20

# A computation asked for afresh: as any cached result's, and no steps done yet.
_PENDING_AGAIN = REFRESH_PENDING_AGAIN | {"done": 0}


def _choice(options: dict) -> SystemsChoice:
    return SystemsChoice(sources=tuple(options.get("sources", ())), include_partial=bool(options["include_partial"]),
                         incomplete=bool(options["incomplete"]), test=options["test"],
                         correction=options["correction"])


def _none_pending(now: datetime) -> Q:
    return refresh_none_pending(now, time_limit=settings.SYSTEMS_TIME_LIMIT)


def _seconds_until_due(computed_at: datetime | None) -> float:
    return refresh_countdown(computed_at, min_seconds=settings.SYSTEMS_REFRESH_MIN_SECONDS)


def _queue(result_id: int, countdown: float) -> None:
    transaction.on_commit(lambda: systems_refresh_task.apply_async((result_id,), countdown=countdown))


def systems_request(*, project: Project, choice: SystemsChoice,
                    user: AbstractBaseUser | None = None) -> SystemsResult:
    """Have a worker compute `choice`'s result anew, once this transaction commits: a no-op (but for the time of
    the request) when one is pending or running already; otherwise queued for when it is due (at most one per
    SYSTEMS_REFRESH_MIN_SECONDS after the last computation). One conditional UPDATE decides, so of two requests at
    once only one queues."""
    now = timezone.now()
    result, _ = SystemsResult.objects.get_or_create(project=project, key=choice.key,
                                                    defaults={"options": choice.as_json()})
    rows = SystemsResult.objects.filter(id=result.id)
    if rows.filter(_none_pending(now)).update(requested_at=now, requested_by=user, total=systems_steps(project),
                                              **_PENDING_AGAIN):
        _queue(result.id, _seconds_until_due(result.computed_at))
    else:
        rows.update(requested_at=now)
    return rows.get()


def _store(*, result: SystemsResult, bundle: SystemsBundle, inputs: dict, started: datetime) -> SystemsResult:
    """Write the bundle as a signed file and point the row at it (the file it replaces removed); then, if the inputs
    changed while it was computed and someone asked meanwhile, queue the next computation (debounced)."""
    blob = pickle.dumps(bundle, protocol=pickle.HIGHEST_PROTOCOL)
    name = default_storage.save(f"{STORE_PREFIX}{result.project_id}/{uuid.uuid4().hex}.pickle", ContentFile(blob))
    rows = SystemsResult.objects.filter(id=result.id)
    old = rows.values_list("file", flat=True).first()
    rows.update(file=name, digest=bundle_digest(blob), inputs=inputs, computed_at=started,
                status=SystemsResult.Status.DONE, error="", finished_at=timezone.now())
    if old and old != name:
        default_storage.delete(old)
    _prune(result.project_id)
    if (rows.filter(status=SystemsResult.Status.DONE, requested_at__gt=started).exists()
            and systems_inputs(result.project) != inputs
            and rows.filter(status=SystemsResult.Status.DONE).update(**_PENDING_AGAIN)):
        _queue(result.id, _seconds_until_due(started))
    return rows.get()


def _prune(project_id: int) -> None:
    """Remove the project's results beyond KEEP_PER_PROJECT, least recently asked for first (not a running one)."""
    stale = list(SystemsResult.objects.filter(project_id=project_id).exclude(status=SystemsResult.Status.RUNNING)
                 .order_by("-requested_at", "-computed_at", "-id")[KEEP_PER_PROJECT:].values_list("id", "file"))
    for _, name in stale:
        if name:
            default_storage.delete(name)
    SystemsResult.objects.filter(id__in=[row_id for row_id, _ in stale]).delete()


def systems_refresh(*, result_id: int) -> SystemsResult | None:
    """The worker's side: compute the result of the row's choice with its progress (steps done of total) and store
    it. A row already computed since its last request, or one a live worker computes, is left as it is (the task
    may run twice); an error is recorded with systems_refresh_fail and raised."""
    result = SystemsResult.objects.select_related("project").filter(id=result_id).first()
    if result is None:
        return None
    if result.computed_at is not None and (result.requested_at is None or result.requested_at <= result.computed_at):
        return result
    project = result.project
    started = timezone.now()
    inputs = systems_inputs(project)
    rows = SystemsResult.objects.filter(id=result.id)
    if not job_take(rows, now=started, total=systems_steps(project), done=0):
        return rows.get()  # a live worker computes it
    with job_heartbeat(rows):
        try:
            bundle = systems_bundle_compute(
                project=project, choice=_choice(result.options),
                progress=lambda done: rows.update(done=done, heartbeat_at=timezone.now()))
        except Exception as exc:
            systems_refresh_fail(result_id=result_id, error=f"{type(exc).__name__}: {exc}")
            raise
        return _store(result=result, bundle=bundle, inputs=inputs, started=started)


def systems_refresh_fail(*, result_id: int, error: str) -> None:
    """Give up on the pending computation: failed, with the error; the result stored before stays, and the next
    visit asks again."""
    job_fail(SystemsResult.objects.filter(id=result_id), error=error)
