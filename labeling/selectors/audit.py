"""Reads of robustness audits as the Robustness pages and the API list them: a judge's audits newest first, with
the error as the reader may see it and what the tokens cost at the judge's prices; the latest report of each kind;
one audit of a project."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet

from labeling.exceptions import NotFound
from labeling.models import AuditJob, Judge, Project
from labeling.selectors.disclosure import JobRow, job_error_shown
from models_llm.cost import usd_cost

# The page and the API list this many of a judge's newest audits.
LISTED_AUDITS = 50


@dataclass(frozen=True)
class AuditRow(JobRow):
    job: AuditJob
    cost_usd: float | None  # the tokens used so far at the judge's prices; None without prices or tokens


def audit_row(job: AuditJob, *, show_errors: bool) -> AuditRow:
    judge = job.judge
    cost = None
    if job.prompt_tokens is not None or job.completion_tokens is not None:
        cost = usd_cost(job.prompt_tokens or 0, job.completion_tokens or 0, judge.price_in, judge.price_out)
    return AuditRow(job=job, error=job_error_shown(job, show=show_errors), cost_usd=cost)


def _audits() -> QuerySet[AuditJob]:
    return AuditJob.objects.select_related("project", "judge", "requested_by")


def audits_of_judge(judge: Judge, *, show_errors: bool) -> list[AuditRow]:
    """The judge's LISTED_AUDITS newest audits of both kinds."""
    jobs = _audits().filter(judge=judge).order_by("-created_at", "-id")[:LISTED_AUDITS]
    return [audit_row(job, show_errors=show_errors) for job in jobs]


def latest_reports(judge: Judge) -> dict[str, AuditJob]:
    """The judge's newest done audit of each kind (kind -> job), in AuditJob.Kind's order."""
    done = _audits().filter(judge=judge, status=AuditJob.Status.DONE).order_by("-finished_at", "-id")
    found = {}
    for kind in AuditJob.Kind.values:
        job = done.filter(kind=kind).first()
        if job is not None:
            found[kind] = job
    return found


def beyond_pool_latest(project: Project) -> tuple[AuditJob | None, AuditJob | None]:
    """The project's newest done beyond-the-pool audit (any judge) and its newest unfinished one (None: none)."""
    jobs = _audits().filter(project=project, kind=AuditJob.Kind.BEYOND_POOL)
    done = jobs.filter(status=AuditJob.Status.DONE).order_by("-finished_at", "-id").first()
    unfinished = jobs.filter(finished_at__isnull=True).order_by("-created_at", "-id").first()
    return done, unfinished


def audit_of_project(*, project: Project, audit_id: int) -> AuditJob:
    """The project's audit `audit_id`, its judge loaded, or NotFound."""
    found = _audits().filter(project=project, id=audit_id).first()
    if found is None:
        raise NotFound("No AuditJob matches the given query.")
    return found
