"""Reads of LLM query generation jobs (DisastIR 3.4): a project's jobs, newest first, and one of them, each as the
reader may see it; the Systems page, the API and the command show the same rows."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from labeling.exceptions import NotFound
from labeling.models import Project, QueryGenerationJob
from labeling.selectors.disclosure import Disclosure, JobRow, job_error_shown

RECENT = 20


@dataclass(frozen=True)
class QueryGenerationRow(JobRow):
    job: QueryGenerationJob
    parameters: dict  # as the reader may see them (blind first)
    problems: list[dict]  # each with the model's answer (`raw`) blanked for those who may not see it


def query_generation_row(job: QueryGenerationJob, *, show_errors: bool, disclosure: Disclosure) -> QueryGenerationRow:
    """The job as a member sees it: the error and the model's unreadable answers for project admins
    (`show_errors`), the parameters as blind first lets them."""
    problems = job.problems if show_errors else [{**problem, "raw": ""} for problem in job.problems]
    return QueryGenerationRow(job=job, error=job_error_shown(job, show=show_errors),
                              parameters=disclosure.generation_parameters(job.parameters), problems=problems)


def query_generations(project: Project) -> QuerySet[QueryGenerationJob]:
    return QueryGenerationJob.objects.filter(project=project).select_related("judge", "requested_by").order_by(
        "-created_at", "-id")


def query_generation_of_project(*, project: Project, job_id: int) -> QueryGenerationJob:
    job = query_generations(project).filter(id=job_id).first()
    if job is None:
        raise NotFound(f"project {project.slug!r} has no query generation job {job_id}")
    return job
