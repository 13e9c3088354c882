"""Queue latency under load: 20 simulated experts doing next -> submit through the API against a PostgreSQL
project of 1M pairs with 1M judgments. Prints p50/p95/p99 server time of both calls and checks that no
label was lost or duplicated.

    DATABASE_URL=postgres://... .venv/bin/python bench/queue.py [--pairs 1000000] [--experts 20] [--items 50] [--think 5]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# This file's name shadows the standard library's `queue` (which Django's imports need): drop bench/ from the
# path and put the repository root there instead.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-only-not-secret")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost,127.0.0.1")
# The validation refresh a label enqueues goes to a throw-away filesystem broker (no worker runs here).
os.environ.setdefault("CELERY_BROKER_URL", "filesystem://")
os.environ.setdefault("CELERY_BROKER_DIR", str(ROOT / "bench" / "out" / "queue-broker"))

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection, connections  # noqa: E402
from django.test import Client  # noqa: E402

from labeling.models import Judge, Label, Lease, Membership, Project  # noqa: E402

TARGET_NEXT_P95_MS = 50.0
TARGET_SUBMIT_P95_MS = 100.0
PAIRS_PER_QUERY = 1000


def build(slug: str, n_pairs: int) -> Project:
    """A project of n_pairs pairs (1,000 per query), 100 passages per 1,000 pairs, one judgment per pair with
    P uniform in [0, 1], written by PostgreSQL itself (generate_series), then analyzed."""
    n_queries = max(1, n_pairs // PAIRS_PER_QUERY)
    n_passages = max(PAIRS_PER_QUERY, n_pairs // 10)
    project = Project.objects.create(slug=slug, name=f"Queue bench {slug}", queue_mix={"uncertain": 80, "random": 20})
    judge = Judge.objects.create(project=project, name="bench-judge", backend="import")
    project.queue_judge = judge
    project.save(update_fields=["queue_judge"])
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO labeling_query (project_id, external_id, text, metadata)
               SELECT %s, 'q' || i, 'What does the bench query number ' || i || ' ask about emissions?', '{}'
               FROM generate_series(1, %s) i""", [project.id, n_queries])
        cursor.execute(
            """INSERT INTO labeling_relevancedefinition (query_id, version, text, created_at)
               SELECT id, 1, 'Passages that answer query ' || external_id || '.', now()
               FROM labeling_query WHERE project_id = %s""", [project.id])
        cursor.execute(
            """INSERT INTO labeling_passage (project_id, external_id, title, text, metadata)
               SELECT %s, 'd' || i, 'Passage ' || i, repeat('Some passage text about emissions and targets. ', 10), '{}'
               FROM generate_series(1, %s) i""", [project.id, n_passages])
        cursor.execute(
            """INSERT INTO labeling_pair (project_id, query_id, passage_id, reference_source)
               SELECT %s, q.id, p.id, ''
               FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS qi FROM labeling_query
                     WHERE project_id = %s) q
               CROSS JOIN generate_series(0, %s) j
               JOIN (SELECT id, row_number() OVER (ORDER BY id) - 1 AS di FROM labeling_passage
                     WHERE project_id = %s) p ON p.di = (q.qi * 7919 + j) %% %s
               ORDER BY q.id, j""",
            [project.id, project.id, PAIRS_PER_QUERY - 1, project.id, n_passages])
        cursor.execute(
            """INSERT INTO labeling_judgment (pair_id, judge_id, definition_id, p_relevant, status, raw_output, error,
                                              method, created_at)
               SELECT x.id, %s, d.id, random(), 'ok', '', '', '', now()
               FROM labeling_pair x JOIN labeling_relevancedefinition d ON d.query_id = x.query_id
               WHERE x.project_id = %s""", [judge.id, project.id])
        cursor.execute("ANALYZE labeling_pair; ANALYZE labeling_judgment; ANALYZE labeling_label; "
                       "ANALYZE labeling_lease; ANALYZE labeling_relevancedefinition")
    return project


def drop(project: Project) -> None:
    """Delete the bench project table by table in SQL (the ORM's cascade would load 1M rows into Python)."""
    pairs = "SELECT id FROM labeling_pair WHERE project_id = %s"
    with connection.cursor() as cursor:
        for statement in (
            f"DELETE FROM labeling_lease WHERE pair_id IN ({pairs})",
            f"DELETE FROM labeling_label WHERE pair_id IN ({pairs})",
            "DELETE FROM labeling_judgment WHERE judge_id IN (SELECT id FROM labeling_judge WHERE project_id = %s)",
            "UPDATE labeling_project SET queue_judge_id = NULL WHERE id = %s",
            "DELETE FROM labeling_pair WHERE project_id = %s",
            "DELETE FROM labeling_relevancedefinition WHERE query_id IN "
            "(SELECT id FROM labeling_query WHERE project_id = %s)",
            "DELETE FROM labeling_query WHERE project_id = %s",
            "DELETE FROM labeling_passage WHERE project_id = %s",
        ):
            cursor.execute(statement, [project.id])
    project.delete()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def warm_up(project: Project) -> None:
    """One claim and skip by a user outside the simulation, so imports and first-query costs are not timed."""
    user, _ = get_user_model().objects.get_or_create(username=f"{project.slug}-warmup")
    Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.EXPERT})
    client = Client()
    client.force_login(user)
    item = client.get(f"/api/projects/{project.slug}/queue/next/", secure=True).json()
    client.post(f"/api/projects/{project.slug}/queue/skip/", {"pair_id": item["pair_id"]},
                content_type="application/json", secure=True)


def simulate(project: Project, n_experts: int, items: int,
             think: float) -> tuple[list[float], list[float], list[tuple], list[str]]:
    users = []
    user_model = get_user_model()
    for i in range(n_experts):
        user, _ = user_model.objects.get_or_create(username=f"{project.slug}-expert{i}")
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.EXPERT})
        users.append(user)
    next_ms: list[float] = []
    submit_ms: list[float] = []
    submitted: list[tuple] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(n_experts)

    def expert(user) -> None:
        reading = random.Random(user.id)
        client = Client()
        client.force_login(user)
        base = f"/api/projects/{project.slug}"
        try:
            barrier.wait()
            # Experts do not all open the page at the same instant: each arrives within the first reading time.
            time.sleep(reading.uniform(0, think))
            for n in range(items):
                started = time.perf_counter()
                response = client.get(f"{base}/queue/next/", secure=True)
                took = (time.perf_counter() - started) * 1000
                if response.status_code != 200:
                    with lock:
                        errors.append(f"next {response.status_code}")
                    break
                item = response.json()
                if think:
                    # The expert reads the passage: 0.5x to 1.5x the mean reading time, not timed.
                    time.sleep(reading.uniform(0.5, 1.5) * think)
                key = f"{user.username}-{n}"
                body = {"pair_id": item["pair_id"], "grade": n % 3, "client_key": key}
                started = time.perf_counter()
                answer = client.post(f"{base}/labels/", body, content_type="application/json", secure=True)
                took_submit = (time.perf_counter() - started) * 1000
                with lock:
                    next_ms.append(took)
                    if answer.status_code == 201:
                        submit_ms.append(took_submit)
                        submitted.append((user.id, item["pair_id"], key))
                    else:
                        errors.append(f"submit {answer.status_code}: {answer.content[:200]!r}")
        finally:
            connections.close_all()

    threads = [threading.Thread(target=expert, args=(user,)) for user in users]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return next_ms, submit_ms, submitted, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--experts", type=int, default=20)
    parser.add_argument("--items", type=int, default=50, help="next -> submit rounds per expert")
    parser.add_argument("--think", type=float, default=5.0,
                        help="mean seconds an expert reads an item before submitting (0: back-to-back calls)")
    parser.add_argument("--keep", action="store_true", help="keep the project")
    args = parser.parse_args()
    if connection.vendor != "postgresql":
        sys.exit("bench/queue.py needs DATABASE_URL pointing at PostgreSQL")
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    slug = f"queue-bench-{int(time.time())}"
    started = time.perf_counter()
    project = build(slug, args.pairs)
    counts = (project.pairs.count(), Label.objects.filter(pair__project=project).count())
    print(f"database: PostgreSQL {connection.cursor().connection.info.server_version}; cores: {os.cpu_count()}")
    print(f"project {slug}: {counts[0]:,} pairs, {args.pairs:,} judgments, built in {time.perf_counter() - started:.0f} s;"
          f" queue mix {project.queue_mix}, k = {project.labels_per_item}")
    try:
        warm_up(project)
        started = time.perf_counter()
        next_ms, submit_ms, submitted, errors = simulate(project, args.experts, args.items, args.think)
        wall = time.perf_counter() - started
        print(f"{args.experts} experts x {args.items} rounds of next -> (read {args.think:g} s) -> submit "
              f"through the API in {wall:.1f} s "
              f"({len(submitted) / wall:.0f} labels/s)")
        for name, values, target in (("next", next_ms, TARGET_NEXT_P95_MS), ("submit", submit_ms, TARGET_SUBMIT_P95_MS)):
            if not values:
                print(f"{name}: no successful calls")
                continue
            p95 = percentile(values, 95)
            print(f"{name:6s} n={len(values):5d}  p50 {percentile(values, 50):6.1f} ms  p95 {p95:6.1f} ms  "
                  f"p99 {percentile(values, 99):6.1f} ms  mean {statistics.fmean(values):6.1f} ms  "
                  f"target p95 < {target:g} ms: {'PASS' if p95 < target else 'MISS'}")
        stored = list(Label.objects.filter(pair__project=project).values_list("annotator_id", "pair_id", "client_key"))
        per_pair = Counter(pair for _, pair, _ in stored)
        lost = set(submitted) - set(stored)
        duplicated = len(stored) - len(set(stored))
        over_k = sum(1 for n in per_pair.values() if n > project.labels_per_item)
        print(f"labels: {len(submitted)} submitted (201), {len(stored)} stored, lost {len(lost)}, duplicated "
              f"{duplicated}, items with more than k labels {over_k}; errors {len(errors)} {Counter(errors).most_common(3)}")
        leftover = Lease.objects.filter(pair__project=project, skipped=False).count()
        print(f"leases held at the end: {leftover} (0 expected: every round submits)")
    finally:
        if not args.keep:
            drop(project)


if __name__ == "__main__":
    main()
