"""Estimates as short jobs (labeling.models.Estimate): a page's Estimate asks a worker, on the queue where the
estimated job would run, what that job would take here, and the page shows the estimate's progress, then its result
or error. Never made in a web request: scoring, retrieval and fine-tuning estimates may load a model and time it
(SmolLM2's scoring probe held two web threads for 18 minutes). Each kind is declared once, in ESTIMATE_KINDS."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.models import Estimate, Judge, Project
from labeling.services.finetune_estimate import finetune_estimate_make, finetune_estimate_read
from labeling.services.jobs import job_fail, job_heartbeat, job_take
from labeling.services.retrieval_estimate import (
    retrieval_estimate_check,
    retrieval_estimate_make,
    retrieval_estimate_read,
)
from labeling.services.scoring_dispatch import bulk_queue_for
from labeling.services.scoring_estimate import scoring_estimate_check, scoring_estimate_make, scoring_estimate_read
from labeling.tasks import estimate_task


@dataclass(frozen=True)
class EstimateKind:
    """How one kind of estimate is asked for, made and shown: `queue` checks what the page asks (the unsaved row;
    a DomainError refuses it before anything is queued) and names the queue the estimated job would run on, so that
    a probe times that queue's workers; `make` runs on the worker and returns the result to store (a DomainError is
    the reason there is none); `read` turns a stored result back into what the page shows."""

    queue: Callable[[Estimate], str]
    make: Callable[[Estimate], dict]
    read: Callable[[Estimate], object]


def _scoring_queue(row: Estimate) -> str:
    scoring_estimate_check(project=row.project, judge=row.judge, scope=row.scope)
    return bulk_queue_for(row.judge)


def _retrieval_queue(row: Estimate) -> str:
    retrieval_estimate_check(project=row.project, arguments=row.arguments)
    return settings.BULK_QUEUE


ESTIMATE_KINDS: dict[str, EstimateKind] = {
    Estimate.Kind.SCORING: EstimateKind(_scoring_queue, scoring_estimate_make, scoring_estimate_read),
    Estimate.Kind.RETRIEVAL: EstimateKind(_retrieval_queue, retrieval_estimate_make, retrieval_estimate_read),
    Estimate.Kind.FINETUNE: EstimateKind(lambda row: settings.FINETUNE_QUEUE, finetune_estimate_make,
                                         finetune_estimate_read),
}


def estimate_request(*, project: Project, kind: str, arguments: dict | None = None, judge: Judge | None = None,
                     scope: str = "", user: AbstractBaseUser | None) -> Estimate:
    """An estimate of a `kind` job started with `arguments` (a scoring estimate's: `judge` and `scope`), made by a
    worker on the queue the job would run on once this commits. A second click while the same estimate is waiting
    or running answers that one."""
    arguments = json.loads(json.dumps(arguments or {}))  # as the JSON field gives it back, to compare with waiting ones
    queue = ESTIMATE_KINDS[kind].queue(Estimate(project=project, kind=kind, judge=judge, scope=scope,
                                                arguments=arguments))
    with transaction.atomic():
        Project.objects.select_for_update().filter(id=project.id).first()  # two clicks at once make one estimate
        waiting = Estimate.objects.filter(project=project, kind=kind, judge=judge, scope=scope,
                                          status__in=[Estimate.Status.PENDING, Estimate.Status.RUNNING])
        estimate = next((row for row in waiting.order_by("-id") if row.arguments == arguments), None)
        if estimate is None:
            estimate = Estimate.objects.create(project=project, kind=kind, judge=judge, scope=scope,
                                               arguments=arguments, requested_by=user)
            transaction.on_commit(lambda: estimate_task.apply_async((estimate.id,), queue=queue))
    return estimate


def estimate_run(*, estimate_id: int) -> Estimate | None:
    """Make the estimate and store it (done), or the reason there is none (failed: a model that cannot be loaded or
    timed, arguments the job would refuse). A finished one is returned as it is (None: it is gone)."""
    row = Estimate.objects.select_related("project", "judge").filter(id=estimate_id).first()
    if row is None or not job_take(Estimate.objects.filter(id=row.id, finished_at__isnull=True)):
        return row
    with job_heartbeat(Estimate.objects.filter(id=row.id)):
        try:
            result = ESTIMATE_KINDS[row.kind].make(row)
        except DomainError as exc:
            return estimate_fail(estimate_id=row.id, error=str(exc))
        Estimate.objects.filter(id=row.id, finished_at__isnull=True).update(
            result=result, status=Estimate.Status.DONE, finished_at=timezone.now())
    return Estimate.objects.filter(id=row.id).first()


def estimate_fail(*, estimate_id: int, error: str) -> Estimate | None:
    """Give up on an estimate (its retries are spent, its time limit passed): failed, with the reason."""
    job_fail(Estimate.objects.filter(id=estimate_id), error=error)
    return Estimate.objects.filter(id=estimate_id).first()


def estimate_result(row: Estimate) -> object | None:
    """The estimate a done row holds, as its page shows it (None before)."""
    return None if row.result is None else ESTIMATE_KINDS[row.kind].read(row)
