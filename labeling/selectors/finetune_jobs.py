"""Reads of fine-tuning jobs as the Fine-tuning page and the API list them: newest first, with the error as the
reader may see it and the last logged loss."""
from __future__ import annotations

from dataclasses import dataclass

from labeling.exceptions import NotFound
from labeling.models import FineTuneJob, Project
from labeling.selectors.disclosure import JobRow, job_error_shown

# The page and the API list this many of the newest jobs.
LISTED_JOBS = 50


@dataclass(frozen=True)
class FineTuneJobRow(JobRow):
    job: FineTuneJob

    @property
    def last_loss(self) -> float | None:
        return self.job.loss_history[-1][1] if self.job.loss_history else None


def finetune_job_row(job: FineTuneJob, *, show_errors: bool) -> FineTuneJobRow:
    return FineTuneJobRow(job=job, error=job_error_shown(job, show=show_errors))


def _jobs(project: Project):
    return FineTuneJob.objects.filter(project=project).select_related(
        "project", "training_set", "teacher", "student", "requested_by")


def finetune_jobs(project: Project, *, show_errors: bool) -> list[FineTuneJobRow]:
    """The project's LISTED_JOBS newest fine-tuning jobs, with their training set, teacher and student."""
    return [finetune_job_row(job, show_errors=show_errors) for job in _jobs(project).order_by("-created_at", "-id")
            [:LISTED_JOBS]]


def finetune_job_of_project(*, project: Project, job_id: int) -> FineTuneJob:
    """The project's fine-tuning job `job_id`, or NotFound."""
    found = _jobs(project).filter(id=job_id).first()
    if found is None:
        raise NotFound("No FineTuneJob matches the given query.")
    return found
