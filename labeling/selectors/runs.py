"""Reads of runs: a project's runs, one by name, a run's rankings for evaluation and its top k per query for
pooling. Entries are read in (query, rank) order, the order of their one index."""
from __future__ import annotations

from collections.abc import Iterator

import numpy as np
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
    their index (no sort in the database) and named through numpy: a run of a million entries takes about a
    second, where joining the names in SQL made PostgreSQL sort the million rows again and naming row by row in
    Python took twice as long."""
    with connection.cursor() as cursor:
        # Plain SQL: two integers a row, read twice as fast as through the ORM's iterator.
        cursor.execute(f"SELECT query_id, passage_id FROM {RunEntry._meta.db_table} WHERE run_id = %s "
                       "ORDER BY query_id, rank", [run.id])
        rows = np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)
    if not len(rows):
        return {}
    entries = RunEntry.objects.filter(run=run)
    # order_by(): the models' default ordering would join the project and sort.
    queries = dict(Query.objects.filter(id__in=entries.values("query_id")).order_by()
                   .values_list("id", "external_id"))
    passages = dict(Passage.objects.filter(id__in=entries.values("passage_id")).order_by()
                    .values_list("id", "external_id").iterator(chunk_size=_CHUNK_ROWS))
    ids = np.fromiter(passages, dtype=np.int64, count=len(passages))
    order = np.argsort(ids)
    names = np.array(list(passages.values()), dtype=object)[order]
    named = names[np.searchsorted(ids[order], rows[:, 1])]
    starts = np.flatnonzero(np.r_[True, rows[1:, 0] != rows[:-1, 0]])
    ends = np.r_[starts[1:], len(rows)]
    return {queries[int(rows[s, 0])]: named[s:e].tolist() for s, e in zip(starts, ends)}


def run_top(run: Run, depth: int) -> Iterator[tuple[int, int, int]]:
    """(query id, passage id, rank) of the run's top `depth` per query, by query id then rank."""
    return (
        RunEntry.objects.filter(run=run, rank__lte=depth).order_by("query_id", "rank")
        .values_list("query_id", "passage_id", "rank").iterator(chunk_size=_CHUNK_ROWS)
    )
