"""The Systems page's cached evaluation, written (#34): asked for (debounced: one computation queued at a time per
choice, at most one per SYSTEMS_REFRESH_MIN_SECONDS after the last, and at most SYSTEMS_MAX_PENDING pending per
project), computed by a worker with its progress, stored as a signed file of the storage. Projects whose runs are
small are evaluated within the request instead, never cached. Reads and the computation itself are
labeling.selectors.systems_cache."""
from __future__ import annotations

import pickle
import uuid
from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.job_kinds import SYSTEMS
from labeling.models import Project, SystemsResult
from labeling.selectors.systems_cache import (
    CachedSystems,
    SystemsBundle,
    SystemsChoice,
    bundle_digest,
    computes_inline,
    systems_bundle_compute,
    systems_cached,
    systems_inputs,
    systems_steps,
)
from labeling.services.jobs import job_fail, job_heartbeat, job_take, refresh_again, refresh_ask, refresh_none_pending
from labeling.tasks import systems_refresh_task

STORE_PREFIX = "systems/"
# Computed results kept per project (each choice of sources and options is one): the least recently asked for beyond
# these are removed. Pending and running ones are not counted (SYSTEMS_MAX_PENDING bounds them), so asking for new
# choices never removes a computed result before one of them is stored.
KEEP_PER_PROJECT = 20
_UNFINISHED = (SystemsResult.Status.PENDING, SystemsResult.Status.RUNNING)


class SystemsBusy(DomainError):
    """The project has SYSTEMS_MAX_PENDING computations pending or running: no other is queued until one ends."""

def _queue(result_id: int, countdown: float) -> None:
    transaction.on_commit(lambda: systems_refresh_task.apply_async((result_id,), countdown=countdown))


@transaction.atomic
def systems_request(*, project: Project, choice: SystemsChoice,
                    user: AbstractBaseUser | None = None) -> SystemsResult:
    """Have a worker compute `choice`'s result anew, once this transaction commits: a no-op (but for the time of
    the request) when one is pending or running already; otherwise queued for when it is due (at most one per
    SYSTEMS_REFRESH_MIN_SECONDS after the last computation), unless the project has SYSTEMS_MAX_PENDING computations
    pending or running already (SystemsBusy, and nothing is written). The project's row is locked while they are
    counted, so of two requests at once only one takes the last place; one conditional UPDATE decides, so of two
    requests for the same choice only one queues."""
    now = timezone.now()
    rows = SystemsResult.objects.filter(project=project, key=choice.key)
    Project.objects.select_for_update().filter(pk=project.pk).values_list("pk", flat=True).first()
    if rows.exclude(refresh_none_pending(SYSTEMS, now)).update(requested_at=now):
        return rows.get()
    unfinished = SystemsResult.objects.filter(project=project).exclude(refresh_none_pending(SYSTEMS, now)).count()
    if unfinished >= settings.SYSTEMS_MAX_PENDING:
        raise SystemsBusy(f"The evaluation is busy: {unfinished} other choices of sources and options are being "
                          f"computed for this project (at most {settings.SYSTEMS_MAX_PENDING} at once), so this one "
                          f"is not queued. Ask again once one of them is done.")
    result, _ = SystemsResult.objects.get_or_create(project=project, key=choice.key,
                                                    defaults={"options": choice.as_json()})
    # No steps done yet of the computation asked for.
    countdown = refresh_ask(SYSTEMS, rows, now=now, user=user, total=systems_steps(project), done=0)
    if countdown is not None:
        _queue(result.id, countdown)
    return rows.get()


def systems_evaluation(*, project: Project, choice: SystemsChoice,
                       user: AbstractBaseUser | None = None) -> CachedSystems:
    """What the page and the API show for `choice`, the one place that decides how: computed within the request
    when the project's runs are small (computes_inline), else the stored result, and a new computation asked for
    (systems_request; SystemsBusy past the project's bound) when it is not fresh."""
    if computes_inline(project):
        return CachedSystems(result=None, bundle=systems_bundle_compute(project=project, choice=choice), fresh=True)
    cached = systems_cached(project=project, choice=choice)
    if cached.fresh:
        return cached
    return CachedSystems(result=systems_request(project=project, choice=choice, user=user), bundle=cached.bundle,
                         fresh=False)


def _store(*, result: SystemsResult, bundle: SystemsBundle, inputs: dict, started: datetime) -> SystemsResult | None:
    """Write the bundle as a signed file and point the row at it (the file it replaces removed); then, if the inputs
    changed while it was computed and someone asked meanwhile, queue the next computation (debounced). A row removed
    meanwhile (its project deleted, or given up by the sweep and then pruned) keeps nothing: the file is removed and
    None returned."""
    blob = pickle.dumps(bundle, protocol=pickle.HIGHEST_PROTOCOL)
    name = default_storage.save(f"{STORE_PREFIX}{result.project_id}/{uuid.uuid4().hex}.pickle", ContentFile(blob))
    rows = SystemsResult.objects.filter(id=result.id)
    old = rows.values_list("file", flat=True).first()
    if not rows.update(file=name, digest=bundle_digest(blob), inputs=inputs, computed_at=started,
                       status=SystemsResult.Status.DONE, error="", finished_at=timezone.now()):
        default_storage.delete(name)
        return None
    if old and old != name:
        default_storage.delete(old)
    _prune(result.project_id)
    if systems_inputs(result.project) != inputs:
        countdown = refresh_again(SYSTEMS, rows, started=started, done=0)
        if countdown is not None:
            _queue(result.id, countdown)
    return rows.first()


def _prune(project_id: int) -> None:
    """Remove the project's finished results beyond KEEP_PER_PROJECT, least recently asked for first (pending and
    running ones are neither removed nor counted)."""
    stale = list(SystemsResult.objects.filter(project_id=project_id).exclude(status__in=_UNFINISHED)
                 .order_by("-requested_at", "-computed_at", "-id")[KEEP_PER_PROJECT:].values_list("id", "file"))
    for _, name in stale:
        if name:
            default_storage.delete(name)
    SystemsResult.objects.filter(id__in=[row_id for row_id, _ in stale]).delete()


def systems_run(*, result_id: int) -> SystemsResult | None:
    """The worker's side: compute the result of the row's choice with its progress (steps done of total) and store
    it. A row already computed since its last request, or one a live worker computes, is left as it is (the task
    may run twice), one removed meanwhile gives None; an error is recorded with systems_fail and raised."""
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
        return rows.first()  # a live worker computes it, or it was removed since it was read (None)
    with job_heartbeat(rows):
        try:
            bundle = systems_bundle_compute(
                project=project, choice=SystemsChoice.from_json(result.options),
                progress=lambda done: rows.update(done=done, heartbeat_at=timezone.now()))
        except Exception as exc:
            systems_fail(result_id=result_id, error=f"{type(exc).__name__}: {exc}")
            raise
        return _store(result=result, bundle=bundle, inputs=inputs, started=started)


def systems_fail(*, result_id: int, error: str) -> None:
    """Give up on the pending computation: failed, with the error; the result stored before stays, and the next
    visit asks again."""
    job_fail(SystemsResult.objects.filter(id=result_id), error=error)
