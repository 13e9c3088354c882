"""The browse page of a query on a 1M-pair project: time of the first page and of a page deep in the keyset cursor,
with and without filters, through the real view (Django's test client in process), with its SQL query count.

    .venv/bin/python bench/browse.py                      # 1M pairs (1,000 queries x 1,000) on SQLite
    .venv/bin/python bench/browse.py --pairs 20000        # smoke run
    DATABASE_URL=postgres://... .venv/bin/python bench/browse.py

It builds the project with SQL alone (no ORM loop): passages (one per 10 pairs), pairs with one pool source each,
a reference grade on the first 20 pairs of each query, one judgment per pair under the query's definition and two
experts' labels on the first 50 pairs of each query. Without DATABASE_URL it uses bench/out/browse/browse.sqlite3
(never the development database) and keeps it, so `--reuse` measures again without rebuilding. A measurement,
not a test: it prints the figures and PASS/MISS against the target, and exits 0 once it has run.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py would shadow the standard library's `queue` (which Django's imports need): drop bench/ from the
# path and put the repository root there instead.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
WORKDIR = ROOT / "bench" / "out" / "browse"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
# DEBUG on: the pages render through the plain static storage (DEBUG=0 needs collectstatic's manifest). It also
# keeps each request's SQL in memory, a few dozen statements here: nothing beside a page's time.
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{WORKDIR / 'browse.sqlite3'}")

import django

django.setup()

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from labeling.models import Judge, Membership, Pair, Project, Query
from labeling.selectors.browse import BrowseFilters, filtered_pairs

TARGET_MS = 300.0
SLUG = "bench-browse"
TOPICS = ("coal", "wind", "solar", "hydrogen", "nuclear", "gas", "biomass")


def _random_unit() -> str:
    # Pair.sample_key's default (labeling.models.project.RandomUnit), which raw inserts must give themselves.
    if connection.vendor == "sqlite":
        return "((RANDOM() / 18446744073709551616.0) + 0.5)"
    return "random()"


def build(n_pairs: int, per_query: int) -> Project:
    """The project, written by the database itself: numbers come from a recursive CTE (SQLite) or
    generate_series (PostgreSQL)."""
    n_queries = max(1, n_pairs // per_query)
    n_passages = max(per_query, n_pairs // 10)
    project = Project.objects.create(slug=SLUG, name="Browse bench")
    judge = Judge.objects.create(project=project, name="bench-judge", backend="import")
    user_model = get_user_model()
    experts = [user_model.objects.get_or_create(username=f"{SLUG}-expert{i}")[0] for i in range(2)]
    sqlite = connection.vendor == "sqlite"
    series = ("WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < %s) SELECT i FROM s"
              if sqlite else "SELECT i FROM generate_series(1, %s) i")
    now = "datetime('now')" if sqlite else "now()"
    topic = f"CASE i %% {len(TOPICS)} " + " ".join(f"WHEN {k} THEN '{t}'" for k, t in enumerate(TOPICS)) + " END"
    with connection.cursor() as cursor:
        cursor.execute(f"""INSERT INTO labeling_query (project_id, external_id, text, metadata)
                           SELECT %s, 'q' || i, 'Which targets does company ' || i || ' set?', '{{}}'
                           FROM ({series}) n""", [project.id, n_queries])
        cursor.execute(f"""INSERT INTO labeling_relevancedefinition (query_id, version, text, created_at, is_draft,
                                                                     origin)
                           SELECT id, 1, 'Numeric targets of ' || external_id || '.', {now}, false, 'manual'
                           FROM labeling_query WHERE project_id = %s""", [project.id])
        cursor.execute(f"""INSERT INTO labeling_passage (project_id, external_id, title, text, metadata)
                           SELECT %s, 'd' || i, 'Report ' || i,
                                  'The company plans to cut emissions from ' || {topic} || ' by ' || (i %% 90)
                                  || ' percent. ' || 'Some more passage text about targets and plans. ', '{{}}'
                           FROM ({series}) n""", [project.id, n_passages])
        # The passages were inserted in one statement, so their ids run consecutively from the smallest: a pair's
        # passage is that id plus an offset (a join on a computed row number would scan the passages per pair).
        cursor.execute("SELECT MIN(id), MAX(id) FROM labeling_passage WHERE project_id = %s", [project.id])
        first, last = cursor.fetchone()
        assert last - first + 1 == n_passages, "passage ids are not consecutive"
        cursor.execute(f"""INSERT INTO labeling_pair (project_id, query_id, passage_id, reference_grade,
                                                      reference_source, sample_key)
                           SELECT %s, q.id, %s + (q.qi * 7919 + j.i) %% %s,
                                  CASE WHEN j.i <= 20 THEN (q.qi + j.i) %% 3 END,
                                  CASE WHEN j.i <= 20 THEN 'qrels/test.tsv' ELSE '' END, {_random_unit()}
                           FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS qi FROM labeling_query
                                 WHERE project_id = %s) q
                           CROSS JOIN ({series}) j
                           ORDER BY q.id, j.i""",
                       [project.id, first, n_passages, project.id, per_query])
        cursor.execute("""INSERT INTO labeling_pairsource (pair_id, system, rank)
                          SELECT id, 'bm25', 1 + (id %% 1000) FROM labeling_pair WHERE project_id = %s""",
                       [project.id])
        cursor.execute(f"""INSERT INTO labeling_judgment (pair_id, judge_id, definition_id, p_relevant, status,
                                                          raw_output, error, method, created_at)
                           SELECT x.id, %s, d.id, ((x.id * 7919) %% 1000) / 1000.0, 'ok', '[Guess]: Yes', '', '',
                                  {now}
                           FROM labeling_pair x JOIN labeling_relevancedefinition d ON d.query_id = x.query_id
                           WHERE x.project_id = %s""", [judge.id, project.id])
        for k, expert in enumerate(experts):
            cursor.execute(f"""INSERT INTO labeling_label (pair_id, annotator_id, grade, role, note, unsure, queue,
                                                           client_key, undone, created_at)
                               SELECT x.id, %s, (x.id + %s * (x.id %% 2)) %% 3, 'annotator', '', false, '', '',
                                      false, {now}
                               FROM labeling_pair x
                               WHERE x.project_id = %s AND x.id - (SELECT MIN(y.id) FROM labeling_pair y
                                                                   WHERE y.project_id = x.project_id
                                                                   AND y.query_id = x.query_id) < 50""",
                           [expert.id, k, project.id])
        cursor.execute("ANALYZE")
    return project


def timed(client: Client, url: str, params: dict, repeats: int) -> tuple[float, int, int]:
    """Median ms of `repeats` GETs (after one untimed), the SQL queries of one, and the rows on the page."""
    client.get(url, params, secure=True)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = client.get(url, params, secure=True)
        times.append((time.perf_counter() - started) * 1000)
    assert response.status_code == 200, response.status_code
    with CaptureQueriesContext(connection) as captured:
        client.get(url, params, secure=True)
    return statistics.median(times), len(captured), response.content.decode().count("<tr data-pair=")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--per-query", type=int, default=1_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reuse", action="store_true", help="measure the project built by an earlier run")
    args = parser.parse_args()
    WORKDIR.mkdir(parents=True, exist_ok=True)
    call_command("migrate", verbosity=0)
    project = Project.objects.filter(slug=SLUG).first()
    if project is not None and not args.reuse:
        sys.exit(f"project {SLUG!r} exists: pass --reuse, or delete {WORKDIR / 'browse.sqlite3'} to rebuild")
    if project is None:
        started = time.perf_counter()
        project = build(args.pairs, args.per_query)
        print(f"built: {time.perf_counter() - started:.0f} s")
    n_pairs = Pair.objects.filter(project=project).count()
    admin, _ = get_user_model().objects.get_or_create(username=f"{SLUG}-admin")
    Membership.objects.get_or_create(project=project, user=admin, defaults={"role": Membership.Role.ADMIN})
    queries = list(Query.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    query = Query.objects.get(id=queries[len(queries) // 2])
    ids = list(Pair.objects.filter(project=project, query=query).order_by("id").values_list("id", flat=True))
    deep = ids[int(len(ids) * 0.9)]
    judge = Judge.objects.get(project=project)
    print(f"{connection.vendor}, {n_pairs:,} pairs, {len(queries):,} queries; query {query.external_id} has "
          f"{len(ids):,} pairs; deep cursor after={deep} (90% through the query)")
    client = Client()
    client.force_login(admin)
    url = f"/projects/{SLUG}/queries/{query.id}/pairs/"
    filtered = {"p_min": "0.2", "p_max": "0.8", "q": "coal"}
    cases = [
        ("first page, no filter", {}),
        ("first page, P 0.2-0.8 + text 'coal'", filtered),
        ("first page, gold grade 1", {"gold": "1"}),
        ("first page, experts disagree", {"disagreement": "experts"}),
        ("first page, judge vs gold", {"disagreement": "judge"}),
        ("deep page, no filter", {"after": str(deep)}),
        ("deep page, P 0.2-0.8 + text 'coal'", {**filtered, "after": str(deep)}),
        ("deep page, gold grade 1 (none left: scans to the end)", {"gold": "1", "after": str(deep)}),
        ("200 per page, no filter", {"n": "200"}),
    ]
    print(f"\n{'page':<56} {'ms':>8} {'SQL':>4} {'rows':>5}  target < {TARGET_MS:.0f} ms")
    for name, params in cases:
        ms, n_sql, rows = timed(client, url, params, args.repeats)
        print(f"{name:<56} {ms:>8.1f} {n_sql:>4} {rows:>5}  {'PASS' if ms < TARGET_MS else 'MISS'}")
    ms, n_sql, _rows = timed(client, f"/projects/{SLUG}/queries/", {}, args.repeats)
    print(f"{'query list (50 queries with pair counts)':<56} {ms:>8.1f} {n_sql:>4} {'':>5}  "
          f"{'PASS' if ms < TARGET_MS else 'MISS'}")
    sql, params = filtered_pairs(project=project, query=query, filters=BrowseFilters(
        judge=judge, p_min=0.2, p_max=0.8, search="coal")).filter(id__gt=deep).order_by("id")[:51].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(("EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN ") + sql, params)
        print("\nplan of the deep filtered page:")
        for row in cursor.fetchall():
            print("  ", row[-1] if connection.vendor == "sqlite" else row[0])


if __name__ == "__main__":
    main()
