"""Reads of retrieval jobs as the Systems page and the API list them: newest first, with the error as the reader
may see it."""
from __future__ import annotations

from dataclasses import dataclass

from labeling.models import Project, RetrievalJob
from labeling.selectors.disclosure import job_error_shown

# The page and the API list this many of the newest jobs: older ones only matter through the runs they wrote.
LISTED_JOBS = 50


@dataclass(frozen=True)
class RetrievalJobRow:
    job: RetrievalJob
    error: str  # the job's error as the reader may see it

    @property
    def unfinished(self) -> bool:
        return self.job.finished_at is None


def retrieval_job_row(job: RetrievalJob, *, show_errors: bool) -> RetrievalJobRow:
    error = job_error_shown(job, show=show_errors)
    return RetrievalJobRow(job=job, error=error)


def retrieval_jobs(project: Project, *, show_errors: bool) -> list[RetrievalJobRow]:
    """The project's LISTED_JOBS newest retrieval jobs, each with the run it wrote (if it is still stored)."""
    jobs = RetrievalJob.objects.filter(project=project).select_related("run").order_by("-created_at", "-id")
    return [retrieval_job_row(job, show_errors=show_errors) for job in jobs[:LISTED_JOBS]]


def retrieval_job_writing(*, project: Project, name: str) -> RetrievalJob | None:
    """The unfinished job that will write the project's run `name` (a second request for the name is refused)."""
    return RetrievalJob.objects.filter(project=project, name=name, finished_at__isnull=True).order_by("id").first()
