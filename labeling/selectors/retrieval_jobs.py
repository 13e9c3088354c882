"""Reads of retrieval jobs as the Systems page and the API list them: newest first, with the error as the reader
may see it."""
from __future__ import annotations

from labeling.models import Project, RetrievalJob
from labeling.selectors.disclosure import JobRow, job_row

# The page and the API list this many of the newest jobs: older ones only matter through the runs they wrote.
LISTED_JOBS = 50


def retrieval_jobs(project: Project, *, show_errors: bool) -> list[JobRow]:
    """The project's LISTED_JOBS newest retrieval jobs, each with the run it wrote (if it is still stored)."""
    jobs = RetrievalJob.objects.filter(project=project).select_related("run").order_by("-created_at", "-id")
    return [job_row(job, show_errors=show_errors) for job in jobs[:LISTED_JOBS]]


def retrieval_job_writing(*, project: Project, name: str) -> RetrievalJob | None:
    """The unfinished job that will write the project's run `name` (a second request for the name is refused)."""
    return RetrievalJob.objects.filter(project=project, name=name, finished_at__isnull=True).order_by("id").first()
