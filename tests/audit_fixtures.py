"""Real audits for the Robustness pages' and API's tests: the multi-condition example bundle as a project whose pairs
have reference grades (a passage is relevant to a query when it meets all the query's conditions), audited by the
bundled MiniLM judge through the audit service and its worker function, and an oracle run that ranks each item's
documents by the conditions they meet."""
from __future__ import annotations

import json
from pathlib import Path

from django.utils import timezone

from labeling.models import AuditJob, Judge, Membership, Pair, Project, Run, RunEntry
from labeling.services.audit import audit_request, audit_run
from labeling.services.bundle_import import bundle_import
from tests.factories import MembershipFactory, UserFactory

MULTICONDITION_EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "multicondition-example"
# Small, so that the tests stay quick on a CPU; every test of the audit still runs, Task 4 with one padding.
PERTURBATION = {"sample": 8, "seed": 1}
MULTICONDITION = {"pads": [512]}
# (kind, parameters) -> the report and counts of the first real audit this process ran: the example project is
# the same in every test, so later tests store that report in their own database instead of scoring it again.
_DONE: dict[tuple[str, str], dict] = {}


def _conditions(metadata: dict, key: str) -> int:
    return metadata["multicondition"][key]


def multicondition_project(slug: str = "mc") -> Project:
    """The example bundle, each pair graded: relevant (the scale's relevant_from) when the passage meets at least
    the query's k conditions, else 0."""
    bundle_import(path=MULTICONDITION_EXAMPLE, project_slug=slug)
    project = Project.objects.get(slug=slug)
    relevant = project.label_scale.relevant_from
    pairs = list(Pair.objects.filter(project=project).select_related("query", "passage"))
    for pair in pairs:
        met = _conditions(pair.passage.metadata, "satisfies") >= _conditions(pair.query.metadata, "k")
        pair.reference_grade = relevant if met else 0
    Pair.objects.bulk_update(pairs, ["reference_grade"])
    return project


def audited(project: Project, judge: Judge, kind: str, parameters: dict, user=None) -> AuditJob:
    """An audit started as the pages start it and run by the worker's function, here and now."""
    job = audit_request(project=project, judge=judge, kind=kind, parameters=parameters, user=user)
    audit_run(job_id=job.id)
    job.refresh_from_db()
    assert job.status == AuditJob.Status.DONE, job.error
    return job


def audited_once(project: Project, judge: Judge, kind: str, parameters: dict, user=None) -> AuditJob:
    """`audited`, the first time in this process for `kind` and `parameters` (the example project and MiniLM); a
    done audit holding that first run's report afterwards."""
    key = (kind, json.dumps(parameters, sort_keys=True))
    if key not in _DONE:
        job = audited(project, judge, kind, parameters, user)
        _DONE[key] = {name: getattr(job, name) for name in ("report", "parameters", "total", "calls")}
        return job
    now = timezone.now()
    return AuditJob.objects.create(project=project, judge=judge, kind=kind, status=AuditJob.Status.DONE,
                                   started_at=now, finished_at=now, requested_by=user, done=_DONE[key]["total"],
                                   **_DONE[key])


def members(project: Project) -> dict[str, object]:
    """An admin, a viewer and an expert of the project, by role."""
    users = {}
    for role in Membership.Role.values:
        users[role] = UserFactory(username=f"{role}-{project.slug}")
        MembershipFactory(project=project, user=users[role], role=role)
    return users


def oracle_run(project: Project, name: str = "oracle") -> Run:
    """Each query ranks its pooled passages by the conditions they meet, most first: every win of MultiConIR's
    Tasks 1 and 2 is won, and the two query styles never disagree."""
    run = Run.objects.create(project=project, name=name, kind=Run.Kind.IMPORTED)
    entries = []
    by_query: dict[int, list[Pair]] = {}
    for pair in Pair.objects.filter(project=project).select_related("passage").order_by("id"):
        by_query.setdefault(pair.query_id, []).append(pair)
    for query_id, pairs in by_query.items():
        ranked = sorted(pairs, key=lambda pair: (-_conditions(pair.passage.metadata, "satisfies"),
                                                 pair.passage.external_id))
        entries += [RunEntry(run=run, query_id=query_id, passage_id=pair.passage_id, rank=rank,
                             score=float(len(ranked) - rank)) for rank, pair in enumerate(ranked, 1)]
    RunEntry.objects.bulk_create(entries)
    Run.objects.filter(id=run.id).update(queries=len(by_query), entries=len(entries),
                                         depth=max(map(len, by_query.values())))
    run.refresh_from_db()
    return run
