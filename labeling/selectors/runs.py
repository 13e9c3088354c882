"""Reads of runs: a project's runs, one by name, a run's rankings for evaluation and its top k per query for
pooling. Entries are read in (query, rank) order, the order of their one index."""
from __future__ import annotations

from collections.abc import Iterator

from django.db import connection
from django.db.models import QuerySet

from labeling.exceptions import NotFound
from labeling.models import Passage, Project, Query, Run, RunEntry

_CHUNK_ROWS = 20_000


def project_runs(project: Project) -> QuerySet[Run]:
    return Run.objects.filter(project=project).order_by("name")


def run_by_name(*, project: Project, name: str) -> Run:
    """The project's run `name`, or NotFound naming the runs it has."""
    found = Run.objects.filter(project=project, name=name).first()
    if found is None:
        known = ", ".join(project_runs(project).values_list("name", flat=True)) or "none"
        raise NotFound(f"project {project.slug!r} has no run {name!r} (its runs: {known})")
    return found


def run_rankings(run: Run) -> dict[str, list[str]]:
    """Query external id -> the passages' external ids, best first. The entries are read as ids in the order of
    their index (no sort in the database) and named from two dicts: a run of a million entries takes a second or
    two, where joining the names in SQL made PostgreSQL sort the million rows again."""
    entries = RunEntry.objects.filter(run=run)
    # order_by(): the models' default ordering would join the project and sort.
    queries = dict(Query.objects.filter(id__in=entries.values("query_id")).order_by()
                   .values_list("id", "external_id"))
    passages = dict(Passage.objects.filter(id__in=entries.values("passage_id")).order_by()
                    .values_list("id", "external_id").iterator(chunk_size=_CHUNK_ROWS))
    rankings: dict[str, list[str]] = {}
    current, ranking = None, []
    with connection.cursor() as cursor:
        # Plain SQL: two integers a row, read twice as fast as through the ORM's iterator.
        cursor.execute(f"SELECT query_id, passage_id FROM {RunEntry._meta.db_table} WHERE run_id = %s "
                       "ORDER BY query_id, rank", [run.id])
        while rows := cursor.fetchmany(_CHUNK_ROWS):
            for query, passage in rows:
                if query != current:
                    current, ranking = query, rankings.setdefault(queries[query], [])
                ranking.append(passages[passage])
    return rankings


def run_top(run: Run, depth: int) -> Iterator[tuple[int, int, int]]:
    """(query id, passage id, rank) of the run's top `depth` per query, by query id then rank."""
    return (
        RunEntry.objects.filter(run=run, rank__lte=depth).order_by("query_id", "rank")
        .values_list("query_id", "passage_id", "rank").iterator(chunk_size=_CHUNK_ROWS)
    )
