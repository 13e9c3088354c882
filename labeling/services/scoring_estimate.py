"""Scoring estimates as short jobs: the Judges page's Estimate asks a worker for scoring_job_estimate (which may load
the judge's model and time it on a few pairs), and shows its progress, then its result or error. Never made in a web
request: SmolLM2's probe held two web threads for 18 minutes."""
from __future__ import annotations

from dataclasses import asdict

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from labeling.models import Judge, Project, ScoringEstimate, ScoringJob
from labeling.selectors.throughput import Throughput
from labeling.services.jobs import job_fail, job_heartbeat, job_take
from labeling.services.scoring import JobEstimate, ScoringError, scoring_job_estimate
from labeling.services.scoring_dispatch import bulk_queue_for
from labeling.tasks import scoring_estimate_task
from models_llm.cost import TokenEstimate


def scoring_estimate_request(*, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING,
                             user: AbstractBaseUser | None) -> ScoringEstimate:
    """An estimate of scoring `scope` with the judge, made by a worker on the queue its chunks go to (a probe times
    the workers' device, and leaves the model loaded where the judge's chunks will run) once this commits. A second
    click while one is waiting or running answers that one."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    if scope not in (ScoringJob.Scope.ALL, ScoringJob.Scope.MISSING):
        raise ScoringError(f"an estimate's scope is 'all' or 'missing', got {scope!r}")
    with transaction.atomic():
        Judge.objects.select_for_update().filter(id=judge.id).first()
        waiting = ScoringEstimate.objects.filter(
            judge=judge, scope=scope, status__in=[ScoringEstimate.Status.PENDING, ScoringEstimate.Status.RUNNING])
        estimate = waiting.order_by("-id").first()
        if estimate is None:
            estimate = ScoringEstimate.objects.create(project=project, judge=judge, scope=scope, requested_by=user)
            queue = bulk_queue_for(judge)
            transaction.on_commit(lambda: scoring_estimate_task.apply_async((estimate.id,), queue=queue))
    return estimate


def scoring_estimate_run(*, estimate_id: int) -> ScoringEstimate | None:
    """Make the estimate and store it (done), or the reason there is none (failed: a judge that cannot be loaded or
    timed, an ensemble judge). A finished one is returned as it is (None: it is gone)."""
    row = ScoringEstimate.objects.select_related("project", "judge").filter(id=estimate_id).first()
    if row is None or not job_take(ScoringEstimate.objects.filter(id=row.id, finished_at__isnull=True)):
        return row
    with job_heartbeat(ScoringEstimate.objects.filter(id=row.id)):
        try:
            estimate = scoring_job_estimate(project=row.project, judge=row.judge, scope=row.scope)
        except ScoringError as exc:
            return scoring_estimate_fail(estimate_id=row.id, error=str(exc))
        ScoringEstimate.objects.filter(id=row.id, finished_at__isnull=True).update(
            result=_stored(estimate), status=ScoringEstimate.Status.DONE, finished_at=timezone.now())
    return ScoringEstimate.objects.filter(id=row.id).first()


def scoring_estimate_fail(*, estimate_id: int, error: str) -> ScoringEstimate | None:
    """Give up on an estimate (its retries are spent, its time limit passed): failed, with the reason."""
    job_fail(ScoringEstimate.objects.filter(id=estimate_id), error=error)
    return ScoringEstimate.objects.filter(id=estimate_id).first()


def _stored(estimate: JobEstimate) -> dict:
    return {"tokens": asdict(estimate.tokens), "cost_usd": estimate.cost_usd,
            "reference_cost_usd": estimate.reference_cost_usd, "observed_pairs": estimate.observed_pairs,
            "wall_s": estimate.wall_s, "sends_prompts": estimate.sends_prompts,
            "throughput": asdict(estimate.throughput) if estimate.throughput else None}


def scoring_estimate_result(row: ScoringEstimate) -> JobEstimate | None:
    """The estimate a done row holds (None before)."""
    if row.result is None:
        return None
    data = row.result
    throughput = data["throughput"]
    return JobEstimate(judge=row.judge, scope=row.scope, tokens=TokenEstimate(**data["tokens"]),
                       cost_usd=data["cost_usd"], reference_cost_usd=data["reference_cost_usd"],
                       observed_pairs=data["observed_pairs"], wall_s=data["wall_s"],
                       sends_prompts=data["sends_prompts"], throughput=Throughput(**throughput) if throughput else None)
