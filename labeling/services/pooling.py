"""The candidate pool grows here: pairs new to the pool, and the provenance (PairSource) of every pair a system
found, from runs (the union of their top k, or DIRAS's inside-and-outside-the-top sample) and from bundle imports, through
one set-based insert (pool_insert)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.db import connection, transaction
from django.db.models import Max

from labeling.exceptions import DomainError
from labeling.models import Judge, Pair, Project, Run, ScoringJob
from labeling.selectors.finetune_diras_sample import (
    DIRAS_INSIDE,
    DIRAS_OUTSIDE,
    DIRAS_TOP,
    diras_sample,
    sample_size_problem,
)
from labeling.services.scoring import JobEstimate, scoring_job_estimate
from labeling.services.validation import validation_request
from labeling.staging import StagingTable


class PoolingError(DomainError):
    """Pooling asked with runs of another project, no runs, or a depth or sample size that makes no sense."""


def _execute(sql: str, params: dict) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return max(cursor.rowcount, 0)


def pool_insert(*, project_id: int, rows_sql: str, params: dict) -> dict[str, int]:
    """Add the pairs `rows_sql` names to the project's pool and record who found them; the caller holds the
    transaction. `rows_sql` is a SELECT of (query_id, passage_id, system, rnk, seq) rows, its parameters in
    `params` as %(name)s (%(project)s is the project's id). A pair not in the pool yet enters in the order of its
    smallest seq (ties: query, then passage id), with no reference grade. Each row whose system is not '' becomes a
    PairSource(system, rank=rnk) unless the pair has a source of that system already, which keeps its rank
    (provenance is added, never changed); rows may give a (pair, system) once at most. Returns
    {"pairs": pairs added, "pool sources": sources added}: running it again writes nothing."""
    params = {**params, "project": project_id}
    pairs = _execute(
        f"""INSERT INTO labeling_pair (project_id, query_id, passage_id, reference_grade, reference_source)
            SELECT %(project)s, s.query_id, s.passage_id, NULL, '' FROM ({rows_sql}) s
            WHERE NOT EXISTS (SELECT 1 FROM labeling_pair x WHERE x.project_id = %(project)s
                              AND x.query_id = s.query_id AND x.passage_id = s.passage_id)
            GROUP BY s.query_id, s.passage_id
            ORDER BY MIN(s.seq), s.query_id, s.passage_id""",
        params,
    )
    if connection.vendor == "postgresql":
        # Rows this transaction just inserted are invisible to autovacuum: without fresh statistics the planner
        # may take a pool that now holds a million more pairs for empty and resolve the sources by nested loops.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE labeling_pair")
            cursor.execute("ANALYZE labeling_pairsource")
    sources = _execute(
        f"""INSERT INTO labeling_pairsource (pair_id, system, rank)
            SELECT x.id, s.system, s.rnk FROM ({rows_sql}) s
            JOIN labeling_pair x ON x.project_id = %(project)s AND x.query_id = s.query_id
                                AND x.passage_id = s.passage_id
            WHERE s.system <> '' AND NOT EXISTS (SELECT 1 FROM labeling_pairsource y
                                                 WHERE y.pair_id = x.id AND y.system = s.system)
            ORDER BY s.seq, s.system""",
        params,
    )
    return {"pairs": pairs, "pool sources": sources}


def _checked_runs(*, project: Project, runs: Sequence[Run]) -> list[Run]:
    if not runs:
        raise PoolingError("name at least one run")
    foreign = [run.name for run in runs if run.project_id != project.id]
    if foreign:
        raise PoolingError(f"runs {foreign} are not runs of project {project.slug!r}")
    return sorted({run.id: run for run in runs}.values(), key=lambda run: run.name)


def _top_rows(runs: Sequence[Run], depth: int) -> tuple[str, dict]:
    """pool_insert's rows for the union of the runs' top `depth` per query: a source per (pair, run) with the
    run's rank; new pairs by query, then their best rank."""
    if depth < 1:
        raise PoolingError(f"depth must be at least 1, got {depth}")
    run_ids = ", ".join(str(int(run.id)) for run in runs)
    sql = f"""SELECT e.query_id, e.passage_id, r.name AS system, e.rank AS rnk,
                     CAST(e.query_id AS BIGINT) * %(span)s + e.rank AS seq
              FROM labeling_runentry e JOIN labeling_run r ON r.id = e.run_id
              WHERE e.run_id IN ({run_ids}) AND e.rank <= %(depth)s"""
    return sql, {"depth": depth, "span": depth + 1}


@dataclass(frozen=True)
class QueryPool:
    """One query's share of a pooling: pairs it would add, and pairs the runs found that the pool holds."""

    query: str  # external id
    new: int
    existing: int


@dataclass(frozen=True)
class PoolPreview:
    """What pool_add would write, computed without writing. `cost`: the dry-run estimate (scoring_job_estimate)
    of judging the new pairs with the judge asked for; None without a judge or without new pairs."""

    new_pairs: int
    existing: int
    sources: int  # PairSource rows it would add (to new pairs and to pairs already in the pool)
    per_query: tuple[QueryPool, ...]
    cost: JobEstimate | None = None


def pool_preview(*, project: Project, runs: Sequence[Run], depth: int, judge: Judge | None = None) -> PoolPreview:
    """Preview pool_add(project, runs, depth): new and existing pairs per query, the sources it would add and,
    with `judge`, what judging the new pairs would cost."""
    runs = _checked_runs(project=project, runs=runs)
    rows_sql, params = _top_rows(runs, depth)
    params = {**params, "project": project.id}
    per_query = []
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT q.external_id, SUM(CASE WHEN x.id IS NULL THEN 1 ELSE 0 END), COUNT(x.id)
                FROM (SELECT DISTINCT r.query_id, r.passage_id FROM ({rows_sql}) r) u
                JOIN labeling_query q ON q.id = u.query_id
                LEFT JOIN labeling_pair x ON x.project_id = %(project)s AND x.query_id = u.query_id
                                         AND x.passage_id = u.passage_id
                GROUP BY u.query_id, q.external_id ORDER BY u.query_id""",
            params,
        )
        per_query = [QueryPool(query=query, new=int(new), existing=int(existing)) for query, new, existing in cursor]
        cursor.execute(
            f"""SELECT COUNT(*) FROM ({rows_sql}) s
                LEFT JOIN labeling_pair x ON x.project_id = %(project)s AND x.query_id = s.query_id
                                         AND x.passage_id = s.passage_id
                WHERE NOT EXISTS (SELECT 1 FROM labeling_pairsource y WHERE y.pair_id = x.id AND y.system = s.system)""",
            params,
        )
        sources = cursor.fetchone()[0]
    new_pairs = sum(row.new for row in per_query)
    cost = None
    if judge is not None and new_pairs:
        cost = _judging_estimate(project=project, rows_sql=rows_sql, params=params, judge=judge)
    return PoolPreview(new_pairs=new_pairs, existing=sum(row.existing for row in per_query), sources=sources,
                       per_query=tuple(per_query), cost=cost)


def _judging_estimate(*, project: Project, rows_sql: str, params: dict, judge: Judge) -> JobEstimate:
    """The scoring estimate of the pairs pool_add would add. It reads pair rows (their query, passage and
    definition), so the pairs are inserted in a savepoint that is rolled back once the estimate is made."""
    with transaction.atomic():
        newest = Pair.objects.filter(project=project).aggregate(top=Max("id"))["top"] or 0
        pool_insert(project_id=project.id, rows_sql=rows_sql, params=params)
        new_ids = list(Pair.objects.filter(project=project, id__gt=newest).values_list("id", flat=True))
        estimate = scoring_job_estimate(project=project, judge=judge, scope=ScoringJob.Scope.SELECTION,
                                        pair_ids=new_ids)
        transaction.set_rollback(True)
    return estimate


def _pool_lock(project: Project) -> None:
    # Pooling and bundle imports of one project take turns (both lock the project row), so two of them never
    # insert the same new pair.
    Project.objects.select_for_update().filter(id=project.id).first()


@transaction.atomic
def pool_add(*, project: Project, runs: Sequence[Run], depth: int) -> dict[str, int]:
    """Pool the union of each run's top `depth` per query: the pairs not in the pool yet, and a
    PairSource(system=run name, rank) for every (pair, run) that found it, pairs already pooled included. New
    pairs enter by query, then by the best rank any of the runs gave them. Pooling the same again writes
    nothing. Returns {"pairs": n, "pool sources": n}."""
    runs = _checked_runs(project=project, runs=runs)
    rows_sql, params = _top_rows(runs, depth)
    _pool_lock(project)
    written = pool_insert(project_id=project.id, rows_sql=rows_sql, params=params)
    if written["pairs"]:
        validation_request(project=project)
    return written


def random_system(seed: int) -> str:
    """The PairSource system of the passages pool_sample draws outside the top."""
    return f"random:{seed}"


def pool_sample_store(*, project: Project, run: Run, rows: Iterable[tuple[int, int, int | None]],
                      seed: int) -> dict[str, int]:
    """Pool a DIRAS sample's rows (query id, passage id, rank or None) in their order; the caller holds the
    transaction. Sources: system=run name with its rank for a ranked row (inside the top), system=random_system(seed)
    with no rank for the others (drawn outside it). Returns pool_insert's counts."""
    _pool_lock(project)
    drawn_by = random_system(seed)
    table = StagingTable(connection, "pool_stage_sample", [
        ("query_id", "bigint"), ("passage_id", "bigint"), ("system", "text"), ("rnk", "integer"), ("seq", "bigint"),
    ])
    table.create()
    with table.writer() as write:
        for seq, (query_id, passage_id, rank) in enumerate(rows, start=1):
            write((query_id, passage_id, run.name if rank is not None else drawn_by, rank, seq))
    written = pool_insert(
        project_id=project.id, rows_sql="SELECT query_id, passage_id, system, rnk, seq FROM pool_stage_sample",
        params={},
    )
    table.drop()
    if written["pairs"]:
        validation_request(project=project)
    return written


@transaction.atomic
def pool_sample(*, project: Project, run: Run, top: int = DIRAS_TOP, inside: int = DIRAS_INSIDE,
                outside: int = DIRAS_OUTSIDE, seed: int = 0) -> dict[str, int]:
    """DIRAS's sampling for distillation (selectors.diras_sample): for each query of the run (by id), `inside`
    passages drawn at random from within its top `top` (each report's top when the passages name reports) and
    `outside` drawn at random from the corpus outside that top, seeded. Sources: system=run name with its rank for
    the inside ones, system=random_system(seed) with no rank for the outside ones. New pairs enter by query, the
    inside draw in rank order then the outside draw in its order. Returns {"pairs", "pool sources"} (the same sample
    again writes nothing) with the draw's counts: "inside", "outside", and "short queries" (queries that had fewer
    than asked on a side and gave all they had)."""
    runs = _checked_runs(project=project, runs=[run])
    if problem := sample_size_problem(top, inside, outside):
        raise PoolingError(problem)
    if not isinstance(seed, int) or seed < 0:
        raise PoolingError(f"the seed must be a non-negative integer, got {seed}")
    sample = diras_sample(project=project, run=runs[0], top=top, inside=inside, outside=outside, seed=seed)
    written = pool_sample_store(project=project, run=run, rows=sample.rows, seed=seed)
    return {**written, "inside": sample.inside_drawn, "outside": sample.outside_drawn,
            "short queries": sample.short_queries}
