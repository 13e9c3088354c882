"""Reads of runs: a project's runs, one by name, a run's rankings for evaluation and its top k per query for
pooling. Entries are read in (query, rank) order, the order of their one index."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from django.db import connection, transaction
from django.db.models import QuerySet

from labeling.exceptions import NotFound
from labeling.models import Project, Run, RunEntry
from labeling.selectors.streams import external_ids

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


@dataclass(frozen=True)
class RunNames:
    """A project's external ids by primary key, laid out to name many runs' entries at once: queries in a dict,
    passages as sorted ids with their names alongside."""

    queries: dict[int, str]
    passage_ids: np.ndarray
    passage_names: np.ndarray

    @classmethod
    def of(cls, project: Project) -> RunNames:
        queries, passages = external_ids(project)
        ids = np.fromiter(passages, dtype=np.int64, count=len(passages))
        order = np.argsort(ids)
        return cls(queries=queries, passage_ids=ids[order],
                   passage_names=np.array(list(passages.values()), dtype=object)[order])


def run_entry_ids(run: Run) -> np.ndarray:
    """The run's entries as (query id, passage id) rows, by query id then rank. Read as ids in the order of their
    index (no sort in the database): joining the names in SQL made PostgreSQL sort a million rows again."""
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # With tens of millions of entries PostgreSQL's planner prefers scanning the whole table (or a bitmap
            # of the run's pages) and sorting a run's million rows (1.8 s, half of it JIT compilation; 0.5 s) to
            # walking the (run, query, rank) index, which returns them in order in 0.33 s (measured with 30 runs
            # of 1M entries).
            cursor.execute("SET LOCAL enable_seqscan = off")
            cursor.execute("SET LOCAL enable_bitmapscan = off")
            cursor.execute("SET LOCAL jit = off")
        # Plain SQL: two integers a row, read twice as fast as through the ORM's iterator.
        cursor.execute(f"SELECT query_id, passage_id FROM {RunEntry._meta.db_table} WHERE run_id = %s "
                       "ORDER BY query_id, rank", [run.id])
        return np.array(cursor.fetchall(), dtype=np.int64).reshape(-1, 2)


def _query_starts(rows: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.r_[True, rows[1:, 0] != rows[:-1, 0]])


def run_top_ids(rows: np.ndarray, depth: int | None) -> np.ndarray:
    """The rows of run_entry_ids within the first `depth` of each query (None: all of them)."""
    if depth is None or not len(rows):
        return rows
    starts = _query_starts(rows)
    position = np.arange(len(rows)) - np.repeat(starts, np.diff(np.r_[starts, len(rows)]))
    return rows[position < depth]


def rankings_named(rows: np.ndarray, names: RunNames) -> dict[str, list[str]]:
    """run_entry_ids' rows as query external id -> the passages' external ids, best first, named through numpy
    with the project's ids read once: collecting the names a run uses cost a semi-join of its entries per run."""
    if not len(rows):
        return {}
    named = names.passage_names[np.searchsorted(names.passage_ids, rows[:, 1])]
    starts = _query_starts(rows)
    ends = np.r_[starts[1:], len(rows)]
    return {names.queries[int(rows[s, 0])]: named[s:e].tolist() for s, e in zip(starts, ends)}


def run_rankings(run: Run, names: RunNames | None = None) -> dict[str, list[str]]:
    """Query external id -> the passages' external ids, best first (pass `names` when reading several runs of a
    project)."""
    rows = run_entry_ids(run)
    if not len(rows):
        return {}
    return rankings_named(rows, names or RunNames.of(run.project))


def run_top(run: Run, depth: int) -> Iterator[tuple[int, int, int]]:
    """(query id, passage id, rank) of the run's top `depth` per query, by query id then rank."""
    return (
        RunEntry.objects.filter(run=run, rank__lte=depth).order_by("query_id", "rank")
        .values_list("query_id", "passage_id", "rank").iterator(chunk_size=_CHUNK_ROWS)
    )
