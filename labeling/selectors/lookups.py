"""Rows a request or a command names inside a project (a judge by name; a query, an item, a scoring job, a run, a
retrieval job or a replay by id) and projects by slug for the commands: the row, or NotFound saying what is missing.
Who may see the project is decided before, by labeling.selectors.projects.project_for_user."""
from __future__ import annotations

from django.db.models import QuerySet

from labeling.exceptions import NotFound
from labeling.models import Estimate, Judge, Pair, Project, Query, ReplayJob, RetrievalJob, Run, ScoringJob


def _no(model: type) -> str:
    # get_object_or_404's words, which the pages and the API answered before these lookups were selectors.
    return f"No {model.__name__} matches the given query."


class JudgeNotFound(NotFound):
    """The project has no judge by that name; `known` are the names it has."""

    def __init__(self, *, project: Project, name: str, known: list[str]) -> None:
        super().__init__(f"project {project.slug!r} has no judge {name!r}")
        self.known = known


def project_by_slug(*, slug: str) -> Project:
    """The project `slug`, whoever asks (the commands run as the operator)."""
    found = Project.objects.filter(slug=slug).first()
    if found is None:
        raise NotFound(f"no project {slug!r}")
    return found


def judge_by_name(*, project: Project, name: str) -> Judge:
    """The project's judge called `name`: the pages, the API and the commands name judges so."""
    found = Judge.objects.filter(project=project, name=name).first()
    if found is None:
        raise JudgeNotFound(project=project, name=name, known=list(project.judges.values_list("name", flat=True)))
    return found


def query_of_project(*, project: Project, query_id: int) -> Query:
    found = Query.objects.filter(project=project, id=query_id).first()
    if found is None:
        raise NotFound(_no(Query))
    return found


def query_by_external_id(*, project: Project, external_id: str) -> Query:
    found = Query.objects.filter(project=project, external_id=external_id).first()
    if found is None:
        raise NotFound(_no(Query))
    return found


def pair_of_project(*, project: Project, pair_id: int) -> Pair:
    found = Pair.objects.filter(project=project, id=pair_id).first()
    if found is None:
        raise NotFound("No such item in this project.")
    return found


def scoring_job_of_project(*, project: Project, job_id: int) -> ScoringJob:
    """The project's scoring job `job_id`, its judge loaded (every page and answer about a job names it)."""
    found = ScoringJob.objects.select_related("judge").filter(project=project, id=job_id).first()
    if found is None:
        raise NotFound(_no(ScoringJob))
    return found


def estimate_of_project(*, project: Project, estimate_id: int) -> Estimate:
    """The project's estimate `estimate_id`, its judge (a scoring estimate's) loaded."""
    found = Estimate.objects.select_related("judge").filter(project=project, id=estimate_id).first()
    if found is None:
        raise NotFound(_no(Estimate))
    return found


def run_of_project(*, project: Project, run_id: int) -> Run:
    found = Run.objects.select_related("created_by").filter(project=project, id=run_id).first()
    if found is None:
        raise NotFound(_no(Run))
    return found


def retrieval_job_of_project(*, project: Project, job_id: int) -> RetrievalJob:
    found = RetrievalJob.objects.filter(project=project, id=job_id).first()
    if found is None:
        raise NotFound(_no(RetrievalJob))
    return found


def replays_of_project(project: Project) -> QuerySet[ReplayJob]:
    """The project's replays, newest first, with who asked; their stored runs and summary are left unread (a list
    shows the jobs, and a replay's runs can be large)."""
    return (ReplayJob.objects.filter(project=project).select_related("requested_by", "project").defer("result")
            .order_by("-created_at", "-id"))


def replay_of_project(*, project: Project, replay_id: int) -> ReplayJob:
    found = ReplayJob.objects.select_related("requested_by", "project").filter(project=project, id=replay_id).first()
    if found is None:
        raise NotFound(_no(ReplayJob))
    return found
