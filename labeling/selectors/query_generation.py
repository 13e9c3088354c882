"""Reads of LLM query generation jobs (DisastIR 3.4): a project's jobs, newest first, and one of them; the Systems
page, the API and the command show the same rows."""
from __future__ import annotations

from django.db.models import QuerySet

from labeling.exceptions import NotFound
from labeling.models import Project, QueryGenerationJob

RECENT = 20


def query_generations(project: Project) -> QuerySet[QueryGenerationJob]:
    return QueryGenerationJob.objects.filter(project=project).select_related("judge", "requested_by").order_by(
        "-created_at", "-id")


def query_generation_of_project(*, project: Project, job_id: int) -> QueryGenerationJob:
    job = query_generations(project).filter(id=job_id).first()
    if job is None:
        raise NotFound(f"project {project.slug!r} has no query generation job {job_id}")
    return job
