"""Reads about scoring: a job's progress (done, failed, speed, time left) and the jobs a page lists."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet
from django.utils import timezone

from labeling.models import Judge, Project, ScoringJob


@dataclass(frozen=True)
class JobProgress:
    job: ScoringJob
    fraction: float
    pairs_per_s: float | None
    eta_s: float | None


def job_progress(job: ScoringJob) -> JobProgress:
    """Speed counts from the first chunk written (model loading excluded) to now or the end."""
    fraction = job.done / job.total if job.total else 1.0
    rate = eta = None
    if job.first_result_at is not None and job.done:
        end = job.finished_at or timezone.now()
        seconds = (end - job.first_result_at).total_seconds()
        first_chunk = job.chunks.filter(finished_at__isnull=False).order_by("finished_at").values_list("size", flat=True).first() or 0
        counted = job.done - first_chunk
        if seconds > 0 and counted > 0:
            rate = counted / seconds
            if job.status == ScoringJob.Status.RUNNING:
                eta = (job.total - job.done) / rate
    return JobProgress(job=job, fraction=fraction, pairs_per_s=rate, eta_s=eta)


def jobs_for_project(project: Project, *, limit: int = 20) -> QuerySet[ScoringJob]:
    return ScoringJob.objects.filter(project=project).select_related("judge").order_by("-created_at", "-id")[:limit]


def judges_for_project(project: Project) -> QuerySet[Judge]:
    return Judge.objects.filter(project=project).order_by("name")
