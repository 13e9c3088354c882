"""Set-based SQL that merges staged bundle rows into a project: new rows are inserted, identical rows are
left alone (so a re-import writes nothing), and a row that would change stored data it must not change is
reported as a conflict naming the file and line."""
from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db.backends.base.base import BaseDatabaseWrapper

from labeling.models.project import DEFINITION_IN_USE_SQL
from labeling.services.pooling import pool_insert
from labeling.staging import StagingTable

# Resolves a staged row's (qext, pext) to its query (c), passage (d) and pair (x).
RESOLVE_PAIR = """
    JOIN import_stage_curdef c ON c.qext = s.qext
    JOIN labeling_passage d ON d.project_id = %(project)s AND d.external_id = s.pext
    JOIN labeling_pair x ON x.project_id = %(project)s AND x.query_id = c.query_id AND x.passage_id = d.id
"""

# The pool's rows for pooling.pool_insert: every pairs.tsv row (its sources), then the first mention of each
# other pair by qrels, labels or judgments. seq is the pairs.tsv row number, and the pool_seq of the other first
# mentions counted on after the last pairs.tsv row: a pair's smallest seq is its first mention in the bundle.
POOL_ROWS = """
    SELECT c.query_id, d.id AS passage_id, s.system, s.rnk, s.seq FROM (
        SELECT qext, pext, system, rnk, seq FROM import_stage_source
        UNION ALL SELECT qext, pext, '', NULL, pool_seq + (SELECT COALESCE(MAX(seq), 0) FROM import_stage_source)
                  FROM import_stage_qrel WHERE pool_seq IS NOT NULL
        UNION ALL SELECT qext, pext, '', NULL, pool_seq + (SELECT COALESCE(MAX(seq), 0) FROM import_stage_source)
                  FROM import_stage_label WHERE pool_seq IS NOT NULL
        UNION ALL SELECT qext, pext, '', NULL, pool_seq + (SELECT COALESCE(MAX(seq), 0) FROM import_stage_source)
                  FROM import_stage_judgment WHERE pool_seq IS NOT NULL
    ) s
    JOIN import_stage_curdef c ON c.qext = s.qext
    JOIN labeling_passage d ON d.project_id = %(project)s AND d.external_id = s.pext
"""


class BundleMerger:
    """Merges the staging tables of one import into project `project_id`. Every method runs inside the
    import's transaction; `report(where, message)` collects conflicts."""

    def __init__(
        self,
        *,
        connection: BaseDatabaseWrapper,
        project_id: int,
        now: datetime,
        report: Callable[[str, str], None],
    ) -> None:
        self.connection = connection
        self.report = report
        self.params = {"project": project_id, "now": connection.ops.adapt_datetimefield_value(now)}
        postgres = connection.vendor == "postgresql"
        self.json = "::jsonb" if postgres else ""
        self.distinct = "IS DISTINCT FROM" if postgres else "IS NOT"
        self.users = get_user_model()._meta.db_table
        if postgres:
            # Every statement here joins whole staged files: hash joins are right, and a row estimate that
            # is off (fresh rows, text vs varchar keys) must not turn one into a million index probes.
            with connection.cursor() as cursor:
                cursor.execute("SET LOCAL enable_nestloop = off")
                cursor.execute("SET LOCAL work_mem = '64MB'")

    def _execute(self, sql: str) -> int:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, self.params)
            return max(cursor.rowcount, 0)

    def _analyze(self, *tables: str) -> None:
        # Rows this transaction just inserted are invisible to autovacuum: without fresh statistics the
        # planner takes a table that now holds a million rows for empty and joins it by nested loops.
        if self.connection.vendor == "postgresql":
            with self.connection.cursor() as cursor:
                for table in tables:
                    cursor.execute(f"ANALYZE {table}")

    def _conflicts(self, sql: str, message: Callable[..., str]) -> None:
        with self.connection.cursor() as cursor:
            cursor.execute(sql, self.params)
            for src, *values in cursor:
                self.report(src, message(*values))

    def queries(self) -> dict[str, int]:
        self._conflicts(
            """SELECT s.src, s.ext FROM import_stage_query s
               JOIN labeling_query q ON q.project_id = %(project)s AND q.external_id = s.ext
               WHERE q.text <> s.text ORDER BY s.seq""",
            lambda ext: f"query {ext!r} is already stored with a different text (an import never rewrites it)",
        )
        created = self._execute(
            f"""INSERT INTO labeling_query (project_id, external_id, text, metadata)
                SELECT %(project)s, s.ext, s.text, s.metadata{self.json} FROM import_stage_query s
                WHERE NOT EXISTS (SELECT 1 FROM labeling_query q
                                  WHERE q.project_id = %(project)s AND q.external_id = s.ext)
                ORDER BY s.seq"""
        )
        updated = self._execute(
            f"""UPDATE labeling_query SET metadata = s.metadata{self.json} FROM import_stage_query s
                WHERE labeling_query.project_id = %(project)s AND labeling_query.external_id = s.ext
                  AND labeling_query.metadata <> s.metadata{self.json}"""
        )
        # A bundle's definition is added as a new version when it differs from the current one (the newest in
        # use); the new version is numbered after every version, LLM drafts included.
        newest = """SELECT d.query_id, MAX(d.version) AS version FROM labeling_relevancedefinition d
                    JOIN labeling_query dq ON dq.id = d.query_id AND dq.project_id = %(project)s"""
        definitions = self._execute(
            f"""INSERT INTO labeling_relevancedefinition (query_id, version, text, author_id, created_at)
                SELECT q.id, COALESCE(top.version, 0) + 1, s.definition, NULL, %(now)s
                FROM import_stage_query s
                JOIN labeling_query q ON q.project_id = %(project)s AND q.external_id = s.ext
                LEFT JOIN ({newest} GROUP BY d.query_id) top ON top.query_id = q.id
                LEFT JOIN ({newest} WHERE {DEFINITION_IN_USE_SQL} GROUP BY d.query_id) cur ON cur.query_id = q.id
                LEFT JOIN labeling_relevancedefinition cur_def
                       ON cur_def.query_id = q.id AND cur_def.version = cur.version
                WHERE s.definition IS NOT NULL AND (cur_def.id IS NULL OR cur_def.text <> s.definition)
                ORDER BY s.seq"""
        )
        self._analyze("labeling_query", "labeling_relevancedefinition")
        return {"queries": created, "query metadata updated": updated, "definitions": definitions}

    def current_definitions(self, table: StagingTable) -> None:
        """Fill `import_stage_curdef`: every query of the project with its current definition (the newest in use,
        not an LLM draft), or NULL."""
        table.create()
        self._execute(
            f"""INSERT INTO import_stage_curdef (qext, query_id, definition_id)
                SELECT q.external_id, q.id,
                       (SELECT d.id FROM labeling_relevancedefinition d
                        WHERE d.query_id = q.id AND {DEFINITION_IN_USE_SQL}
                        ORDER BY d.version DESC LIMIT 1)
                FROM labeling_query q WHERE q.project_id = %(project)s"""
        )
        table.analyze()

    def passages(self) -> dict[str, int]:
        self._conflicts(
            """SELECT s.src, s.ext FROM import_stage_passage s
               JOIN labeling_passage p ON p.project_id = %(project)s AND p.external_id = s.ext
               WHERE p.text <> s.text OR p.title <> s.title ORDER BY s.seq""",
            lambda ext: f"passage {ext!r} is already stored with a different title or text "
            "(an import never rewrites it)",
        )
        created = self._execute(
            f"""INSERT INTO labeling_passage (project_id, external_id, title, text, metadata)
                SELECT %(project)s, s.ext, s.title, s.text, s.metadata{self.json} FROM import_stage_passage s
                WHERE NOT EXISTS (SELECT 1 FROM labeling_passage p
                                  WHERE p.project_id = %(project)s AND p.external_id = s.ext)
                ORDER BY s.seq"""
        )
        updated = self._execute(
            f"""UPDATE labeling_passage SET metadata = s.metadata{self.json} FROM import_stage_passage s
                WHERE labeling_passage.project_id = %(project)s AND labeling_passage.external_id = s.ext
                  AND labeling_passage.metadata <> s.metadata{self.json}"""
        )
        self._analyze("labeling_passage")
        return {"passages": created, "passage metadata updated": updated}

    def pairs(self, *, all_pairs: bool) -> dict[str, int]:
        # A system's rank that differs from the stored one is a conflict; pool_insert, which keeps a stored
        # source as it is, has already left that row out.
        written = pool_insert(project_id=self.params["project"], rows_sql=POOL_ROWS, params=self.params)
        if all_pairs:
            written["pairs"] += self._execute(
                """INSERT INTO labeling_pair (project_id, query_id, passage_id, reference_grade, reference_source)
                   SELECT %(project)s, q.id, d.id, NULL, '' FROM labeling_query q
                   JOIN labeling_passage d ON d.project_id = %(project)s
                   WHERE q.project_id = %(project)s
                     AND NOT EXISTS (SELECT 1 FROM labeling_pair x WHERE x.project_id = %(project)s
                                     AND x.query_id = q.id AND x.passage_id = d.id)
                   ORDER BY q.id, d.id"""
            )
            self._analyze("labeling_pair")
        self._conflicts(
            f"""SELECT s.src, s.system, x.id, y.rank, s.rnk FROM import_stage_source s {RESOLVE_PAIR}
                JOIN labeling_pairsource y ON y.pair_id = x.id AND y.system = s.system
                WHERE s.system <> '' AND y.rank {self.distinct} s.rnk ORDER BY s.seq""",
            lambda system, pair, stored, new: f"system {system!r} is already stored with rank {stored} for this "
            f"pair, not {new}",
        )
        self._conflicts(
            f"""SELECT s.src, x.reference_grade, s.grade FROM import_stage_qrel s {RESOLVE_PAIR}
                WHERE x.reference_grade IS NOT NULL AND x.reference_grade <> s.grade ORDER BY s.seq""",
            lambda stored, new: f"the pair already has reference grade {stored}, not {new}",
        )
        grades = self._execute(
            f"""UPDATE labeling_pair SET reference_grade = r.grade, reference_source = r.source
                FROM (SELECT x.id AS pair_id, s.grade, s.source FROM import_stage_qrel s {RESOLVE_PAIR}) r
                WHERE labeling_pair.id = r.pair_id AND labeling_pair.reference_grade IS NULL"""
        )
        return written | {"reference grades": grades}

    def labels(self) -> dict[str, int]:
        self._analyze("labeling_label")
        annotator = f"JOIN {self.users} u ON u.username = s.annotator"
        superseded = self._execute(
            f"""UPDATE labeling_label SET superseded_at = %(now)s
                WHERE superseded_at IS NULL AND id IN (
                    SELECT l.id FROM import_stage_label s {RESOLVE_PAIR} {annotator}
                    JOIN labeling_label l ON l.pair_id = x.id AND l.annotator_id = u.id AND l.superseded_at IS NULL
                    WHERE l.grade <> s.grade OR l.role <> s.role OR l.note <> s.note)"""
        )
        created = self._execute(
            f"""INSERT INTO labeling_label (pair_id, annotator_id, grade, role, definition_id, note,
                                            time_spent_seconds, created_at, superseded_at)
                SELECT x.id, u.id, s.grade, s.role, c.definition_id, s.note, NULL, %(now)s, NULL
                FROM import_stage_label s {RESOLVE_PAIR} {annotator}
                WHERE NOT EXISTS (SELECT 1 FROM labeling_label l
                                  WHERE l.pair_id = x.id AND l.annotator_id = u.id AND l.superseded_at IS NULL)
                ORDER BY s.seq"""
        )
        return {"labels": created, "labels superseded": superseded}

    def judgments(self) -> dict[str, int]:
        # Fresh statistics also for rows committed moments ago (autovacuum lags): a judge thought to have
        # a handful of judgments makes a hash table of a million rows with a thousand keys.
        self._analyze("labeling_judgment", "labeling_judge")
        judge = "JOIN labeling_judge g ON g.project_id = %(project)s AND g.name = s.judge"
        same_key = """j.pair_id = x.id AND j.judge_id = g.id
                      AND COALESCE(j.definition_id, 0) = COALESCE(c.definition_id, 0)"""
        guess = "CASE WHEN s.guess IS NULL THEN NULL ELSE s.guess = 1 END"
        self._conflicts(
            f"""SELECT s.src, s.judge, j.p_relevant, s.p FROM import_stage_judgment s {RESOLVE_PAIR} {judge}
                JOIN labeling_judgment j ON {same_key}
                WHERE j.status <> 'ok' OR j.p_relevant <> s.p OR j.guess {self.distinct} ({guess})
                   OR j.confidence {self.distinct} s.confidence
                ORDER BY s.seq""",
            lambda name, stored, new: f"judge {name!r} already has a judgment of this pair under the current "
            f"definition with P(relevant)={stored}, not {new}",
        )
        created = self._execute(
            f"""INSERT INTO labeling_judgment (pair_id, judge_id, definition_id, p_relevant, guess, confidence,
                                               raw_output, status, error, created_at)
                SELECT x.id, g.id, c.definition_id, s.p, {guess}, s.confidence, '', 'ok', '', %(now)s
                FROM import_stage_judgment s {RESOLVE_PAIR} {judge}
                WHERE NOT EXISTS (SELECT 1 FROM labeling_judgment j WHERE {same_key})"""
        )
        return {"judgments": created}
