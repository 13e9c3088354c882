"""Rows/s and peak memory of the web process serving `GET /api/projects/{slug}/qrels/` at two project sizes: the
export streams, so the peak must not grow with the project.

A measurement, not a test: it prints a table and always exits 0 once it has run.

    .venv/bin/python bench/export_api.py                         # 100k and 1M pairs, SQLite under bench/out/
    .venv/bin/python bench/export_api.py --sizes 20000 --formats trec   # smoke run

It builds (bulk_create) or reuses one project per size in its own SQLite file: 1,000 pairs per query, one passage
per ten pairs, one judgment per pair from one judge, a reference grade on every fifth pair. For each size and
format it starts a fresh gunicorn (one sync worker, DEBUG=0), fetches the export with a token through a streaming
client that reads 1 MiB at a time, and reports rows, seconds, rows/s, the worker's RSS before the export and its
peak during it (the larger of psutil sampled every 20 ms and the kernel's VmHWM).
"""
from __future__ import annotations

import argparse
import http.client
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import psutil

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py shadows the standard library's `queue`, which Django's imports need: put the repository root on
# the path in place of bench/.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
WORKDIR = ROOT / "bench" / "out" / "export-api"  # its SQLite file and the servers' logs
JUDGE = "bench-judge"
PAIRS_PER_QUERY = 1000
BATCH = 20_000
# What the web process runs under: production settings, no TLS redirect on the loopback.
SERVER_ENV = {"DEBUG": "0", "SECRET_KEY": "bench-only-not-secret", "ALLOWED_HOSTS": "127.0.0.1",
              "SECURE_SSL_REDIRECT": "0"}
SOURCES = {"trec": f"judge:{JUDGE}", "beir": "human", "jsonl": f"judge:{JUDGE}"}


def setup_django(database: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ.update({key: value for key, value in SERVER_ENV.items() if key not in os.environ})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build(n_pairs: int) -> str:
    """The project `bench-export-<n_pairs>`, built unless a complete one is there already; returns its slug."""
    from django.utils import timezone

    from labeling.models import Judge, Judgment, Pair, Passage, Project, Query, RelevanceDefinition

    slug = f"bench-export-{n_pairs}"
    found = Project.objects.filter(slug=slug).first()
    if found is not None and Judgment.objects.filter(judge__project=found).count() == n_pairs:
        return slug
    if found is not None:
        found.delete()
    started = time.perf_counter()
    rng = random.Random(n_pairs)
    project = Project.objects.create(slug=slug, name=f"Export bench {n_pairs:,}")
    judge = Judge.objects.create(project=project, name=JUDGE, backend=Judge.Backend.IMPORT)
    n_queries = max(1, n_pairs // PAIRS_PER_QUERY)
    n_passages = max(PAIRS_PER_QUERY, n_pairs // 10)
    queries = Query.objects.bulk_create(
        Query(project=project, external_id=f"q{i}", text=f"What does bench query {i} ask?") for i in range(n_queries))
    definitions = RelevanceDefinition.objects.bulk_create(
        RelevanceDefinition(query=query, version=1, text=f"Passages answering {query.external_id}.")
        for query in queries)
    Passage.objects.bulk_create((Passage(project=project, external_id=f"d{i}", text="Bench passage text.")
                                 for i in range(n_passages)), batch_size=BATCH)
    passage_ids = list(Passage.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    for start in range(0, n_pairs, BATCH):
        pairs = []
        for i in range(start, min(n_pairs, start + BATCH)):
            qi, j = divmod(i, PAIRS_PER_QUERY)
            pairs.append(Pair(project=project, query=queries[qi], passage_id=passage_ids[(qi * 7919 + j) % n_passages],
                              reference_grade=rng.choice((0, 0, 1, 2)) if i % 5 == 0 else None))
        Pair.objects.bulk_create(pairs)
    by_query = {query.id: definition.id for query, definition in zip(queries, definitions)}
    pairs = Pair.objects.filter(project=project).order_by("id").values_list("id", "query_id").iterator(BATCH)
    batch, now = [], timezone.now()
    for pair_id, query_id in pairs:
        batch.append(Judgment(pair_id=pair_id, judge=judge, definition_id=by_query[query_id],
                              p_relevant=round(rng.random(), 4), status=Judgment.Status.OK, created_at=now))
        if len(batch) == BATCH:
            Judgment.objects.bulk_create(batch)
            batch = []
    Judgment.objects.bulk_create(batch)
    print(f"built {slug}: {n_pairs:,} pairs and judgments in {time.perf_counter() - started:.0f} s", flush=True)
    return slug


def admin_token(slugs: list[str]) -> str:
    from django.contrib.auth import get_user_model

    from labeling.models import Membership, Project
    from labeling.services.users import user_token_ensure

    user, _ = get_user_model().objects.get_or_create(username="bench-export-admin")
    for project in Project.objects.filter(slug__in=slugs):
        Membership.objects.get_or_create(project=project, user=user, defaults={"role": Membership.Role.ADMIN})
    return user_token_ensure(user=user).key


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(database: Path, port: int, log: Path) -> tuple[subprocess.Popen, psutil.Process]:
    """gunicorn with one sync worker; returns the master and the worker, which serves every request."""
    env = {**os.environ, **SERVER_ENV, "DATABASE_URL": f"sqlite:///{database}"}
    argv = [sys.executable, "-m", "gunicorn", "annotator.wsgi:application", "--bind", f"127.0.0.1:{port}",
            "--workers", "1", "--worker-class", "sync", "--timeout", "1800", "--log-level", "warning"]
    with log.open("w") as output:
        master = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        workers = psutil.Process(master.pid).children()
        if workers:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return master, workers[0]
            except OSError:
                pass
        if master.poll() is not None:
            break
        time.sleep(0.2)
    master.kill()
    sys.exit(f"gunicorn did not start: see {log}")


def vm_hwm_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def fetch(port: int, path: str, token: str) -> tuple[int, int, float]:
    """(status, lines, seconds) of a GET read 1 MiB at a time, as a streaming client does."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1800)
    started = time.perf_counter()
    connection.request("GET", path, headers={"Authorization": f"Token {token}"})
    response = connection.getresponse()
    lines = 0
    while chunk := response.read(1 << 20):
        lines += chunk.count(b"\n")
    seconds = time.perf_counter() - started
    connection.close()
    return response.status, lines, seconds


def measure(workdir: Path, slug: str, format: str, token: str) -> dict:
    port = free_port()
    master, worker = start_server(workdir / "bench.sqlite3", port, workdir / f"gunicorn-{slug}-{format}.log")
    try:
        # One small request first, so imports and the first queries are not counted as the export's memory.
        fetch(port, f"/api/projects/{slug}/", token)
        before = worker.memory_info().rss / 2**20
        peak = before
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.wait(0.02):
                peak = max(peak, worker.memory_info().rss / 2**20)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        query = urlencode({"format": format, "source": SOURCES[format]})
        status, lines, seconds = fetch(port, f"/api/projects/{slug}/qrels/?{query}", token)
        done.set()
        sampler.join()
        peak = max(peak, vm_hwm_mb(worker.pid))
    finally:
        master.terminate()
        master.wait(timeout=30)
    rows = lines - (1 if format == "beir" else 0)
    return {"slug": slug, "format": format, "source": SOURCES[format], "status": status, "rows": rows,
            "seconds": seconds, "before": before, "peak": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="pairs per project")
    parser.add_argument("--formats", nargs="+", choices=list(SOURCES), default=["trec", "jsonl"])
    parser.add_argument("--workdir", type=Path, default=WORKDIR)
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    database = args.workdir / "bench.sqlite3"
    setup_django(database)
    slugs = [build(size) for size in args.sizes]
    token = admin_token(slugs)
    print(f"nproc: {os.cpu_count()}; SQLite {database}; gunicorn, 1 sync worker, DEBUG=0", flush=True)
    results = [measure(args.workdir, slug, format, token) for slug in slugs for format in args.formats]
    print(f"\n{'project':<22} {'format':<6} {'source':<20} {'http':>4} {'rows':>10} {'seconds':>8} {'rows/s':>10} "
          f"{'RSS before MB':>13} {'peak MB':>8}")
    for r in results:
        print(f"{r['slug']:<22} {r['format']:<6} {r['source']:<20} {r['status']:>4} {r['rows']:>10,} "
              f"{r['seconds']:>8.2f} {r['rows'] / r['seconds']:>10,.0f} {r['before']:>13.0f} {r['peak']:>8.0f}")
    for format in args.formats:
        peaks = [r["peak"] - r["before"] for r in results if r["format"] == format]
        if len(peaks) > 1:
            print(f"{format}: the export adds {' -> '.join(f'{p:.0f}' for p in peaks)} MB to the worker as the "
                  f"project grows {' -> '.join(f'{s:,}' for s in args.sizes)} pairs")


if __name__ == "__main__":
    main()
