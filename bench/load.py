"""Load on real processes: gunicorn (4 workers) and a Celery worker on PostgreSQL and Redis, driven by locust
over loopback: experts doing next -> read 2-8 s -> submit and viewers refreshing the validation page, while
a scoring job runs against a local OpenAI-compatible stub. Prints p50/p95/p99 per endpoint and the errors,
then checks the labels in the database (lost, duplicated, over the overlap) and the job's progress.

    pip install -r requirements-bench.txt
    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://127.0.0.1:6379/0 .venv/bin/python bench/load.py

Everything runs in a database of its own (created on the DATABASE_URL server, dropped at the end unless
--keep) and a Redis database of its own (--broker-db); the user's data is never read or written.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import math
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py shadows the standard library's `queue` (which Celery, logging and requests import): drop bench/
# from the path and put the repository root there instead.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
OUT = ROOT / "bench" / "out" / "load"
LOCUSTFILE = ROOT / "bench" / "locustfile_load.py"

TARGET_NEXT_P95_MS = 100.0
TARGET_SUBMIT_P95_MS = 100.0
THINK_S = (2.0, 8.0)  # an expert reads an item for this long (uniform) before submitting
STUB_ENDPOINT = "load-stub"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=int, default=60, help="seconds locust runs (--run-time)")
    parser.add_argument("--experts", type=int, default=50)
    parser.add_argument("--viewers", type=int, default=5)
    parser.add_argument("--spawn-rate", type=float, default=10, help="users started per second")
    parser.add_argument("--pairs", type=int, default=20_000, help="pairs in the project (1,000 per query)")
    parser.add_argument("--gold", type=int, default=500,
                        help="pairs labelled before the run by two seed experts, so the validation page has data")
    parser.add_argument("--web-workers", type=int, default=4, help="gunicorn worker processes")
    parser.add_argument("--broker-db", type=int, default=15,
                        help="the Redis database (on CELERY_BROKER_URL's server) the bench's tasks go through")
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    return parser.parse_args()


def require_tools() -> None:
    missing = [name for name in ("locust", "gunicorn") if importlib.util.find_spec(name) is None]
    if missing:
        sys.exit(f"{' and '.join(missing)} not installed: run `.venv/bin/pip install -r requirements-bench.txt`")


def bench_urls(broker_db: int) -> tuple[str, str, str]:
    """(the user's DATABASE_URL, the bench database's URL, the bench broker URL); exits unless PostgreSQL and
    Redis are named."""
    database = os.environ.get("DATABASE_URL", "")
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not database.startswith(("postgres://", "postgresql://")):
        sys.exit("DATABASE_URL must point at PostgreSQL (postgres://user:password@host:5432/name; the role needs "
                 "CREATEDB: the bench creates and drops a database of its own). See bench/README.md.")
    if not broker.startswith(("redis://", "rediss://")):
        sys.exit("CELERY_BROKER_URL must point at Redis (redis://127.0.0.1:6379/0); the bench uses database "
                 f"--broker-db ({broker_db}) on that server. See bench/README.md.")
    parts = urlsplit(broker)
    if parts.path.strip("/") == str(broker_db):
        sys.exit(f"CELERY_BROKER_URL already uses Redis database {broker_db}: pass another --broker-db")
    name = f"annotator_load_{time.strftime('%Y%m%d_%H%M%S')}"
    return (database, urlunsplit(urlsplit(database)._replace(path=f"/{name}")),
            urlunsplit(parts._replace(path=f"/{broker_db}")))


class LLMStub(ThreadingHTTPServer):
    """An OpenAI-compatible `POST /v1/chat/completions` on 127.0.0.1 that answers every Tok request at once:
    the first token's top_logprobs, with P(Yes) fixed by the prompt's hash (tests/models_llm/fake_openai.py
    scripts replies for tests; this one only counts them)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _StubHandler)
        self.requests = 0
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"

    def handle_error(self, request, client_address) -> None:  # noqa: ANN001
        pass  # a worker stopped with a connection open: nothing to report


class _StubHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with self.server.lock:
            self.server.requests += 1
        prompt = body["messages"][-1]["content"]
        p = (int(hashlib.sha256(prompt.encode()).hexdigest()[:8], 16) % 998 + 1) / 1000
        top = [{"token": "Yes", "logprob": math.log(p), "bytes": list(b"Yes")},
               {"token": "No", "logprob": math.log(1 - p), "bytes": list(b"No")}]
        first = top[0] if p >= 0.5 else top[1]
        data = json.dumps({
            "id": "chatcmpl-load", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
            "choices": [{"index": 0, "message": {"role": "assistant", "content": first["token"]},
                         "finish_reason": "length", "logprobs": {"content": [{**first, "top_logprobs": top}]}}],
            "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 1,
                      "total_tokens": len(prompt) // 4 + 1},
        }).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ARGS = parse_args()
require_tools()
USER_DATABASE_URL, DATABASE_URL, BROKER_URL = bench_urls(ARGS.broker_db)

STUB = LLMStub()
# Production settings (DEBUG=0) with only what plain http on loopback needs relaxed: no https redirect, HSTS or
# secure-only cookies. Children (gunicorn, the worker, manage.py) inherit this environment.
os.environ.update({
    "DJANGO_SETTINGS_MODULE": "annotator.settings",
    "DATABASE_URL": DATABASE_URL,
    "CELERY_BROKER_URL": BROKER_URL,
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "ALLOWED_HOSTS": "127.0.0.1",
    "SECURE_SSL_REDIRECT": "0",
    "SECURE_HSTS_SECONDS": "0",
    "SESSION_COOKIE_SECURE": "0",
    "CSRF_COOKIE_SECURE": "0",
    "VAR_DIR": str(OUT / "var"),  # collectstatic's output; never the developer's var/
    "LLM_ENDPOINTS": json.dumps({STUB_ENDPOINT: {"base_url": STUB.base_url, "allow_local": True}}),
})

import django  # noqa: E402

django.setup()

import redis  # noqa: E402
import requests  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, connections  # noqa: E402
from psycopg import connect, sql  # noqa: E402

from labeling.models import Judgment, Label, Lease, Membership, Project, ScoringJob  # noqa: E402
from labeling.selectors.scoring import job_progress  # noqa: E402
from labeling.services.judges import judge_create  # noqa: E402
from labeling.services.scoring import scoring_request  # noqa: E402

# bench/queue.py builds a PostgreSQL project of N pairs with one judgment each: load it under another name.
_spec = importlib.util.spec_from_file_location("bench_queue", ROOT / "bench" / "queue.py")
bench_queue = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_queue)


# --- the database, the broker and the processes ---------------------------------------------------------------


def database_create() -> None:
    name = urlsplit(DATABASE_URL).path.lstrip("/")
    with connect(USER_DATABASE_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def database_drop() -> None:
    connections.close_all()
    name = urlsplit(DATABASE_URL).path.lstrip("/")
    with connect(USER_DATABASE_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


# What Celery and kombu keep in a Redis database: a previous bench run may have left these, nothing else.
KOMBU_KEYS = ("celery*", "_kombu*", "unacked*")


def broker_keys(client: redis.Redis) -> tuple[list[bytes], list[bytes]]:
    """(kombu's keys, any other keys) in the bench's Redis database."""
    kombu = {key for pattern in KOMBU_KEYS for key in client.scan_iter(match=pattern)}
    return sorted(kombu), sorted(set(client.scan_iter()) - kombu)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(name: str, argv: list[str], **env: str) -> subprocess.Popen:
    # A session of its own: the whole group (gunicorn's or Celery's children too) is stopped at the end, and a
    # terminal Ctrl-C reaches only this script, which then stops them.
    with open(OUT / f"{name}.log", "w") as log:
        return subprocess.Popen(argv, cwd=ROOT, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def stop(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """SIGTERM to the main process (gunicorn's master stops its workers, Celery finishes its task first), then
    SIGKILL to whatever of the group is left."""
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait_for(what: str, ready, proc: subprocess.Popen, log: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}; the end of {OUT / log}:\n"
                               f"{(OUT / log).read_text()[-3000:]}")
        if ready():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s; see {OUT / log}")


def answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=60, allow_redirects=False).status_code == 200
    except requests.RequestException:
        return False


# --- the project ----------------------------------------------------------------------------------------------


def seed(password: str) -> Project:
    """bench/queue.py's project (uncertain 80 % + random 20 % over one judge's P) with k = 2 on every item,
    the experts and viewers (one password, hashed once), and `--gold` pairs labelled by two seed experts."""
    project = bench_queue.build("load", ARGS.pairs)
    Project.objects.filter(id=project.id).update(labels_per_item=2, overlap_share=1.0)
    project.refresh_from_db()
    hashed = make_password(password)
    names = ([f"load-expert-{i}" for i in range(ARGS.experts)] + ["load-seed-0", "load-seed-1", "load-warmup"]
             + [f"load-viewer-{i}" for i in range(ARGS.viewers)])
    users = get_user_model().objects.bulk_create([get_user_model()(username=n, password=hashed) for n in names])
    Membership.objects.bulk_create([
        Membership(project=project, user=user,
                   role=Membership.Role.VIEWER if user.username.startswith("load-viewer") else Membership.Role.EXPERT)
        for user in users
    ])
    rng = random.Random(0)
    seeds = [user for user in users if user.username.startswith("load-seed")]
    gold = (Judgment.objects.filter(pair__project=project).select_related("pair")
            .order_by("pair_id")[:ARGS.gold])
    Label.objects.bulk_create([
        Label(pair=judgment.pair, annotator=user, definition_id=judgment.definition_id, queue="random",
              created_at=judgment.created_at,
              grade=min(2, max(0, int(judgment.p_relevant * 3 + rng.uniform(-0.6, 0.6)))))
        for judgment in gold for user in seeds
    ])
    return project


def warm_up(base: str, slug: str, password: str) -> None:
    """next and skip through the server from two clients per web worker at once, so that the timed requests do
    not pay each worker's first imports of the views (seconds: scikit-learn and scipy)."""
    answer = requests.post(f"{base}/api/token/", data={"username": "load-warmup", "password": password}, timeout=120)
    if answer.status_code != 200:
        raise RuntimeError(f"warm-up: /api/token/ answered {answer.status_code}; see {OUT / 'gunicorn.log'}")
    token = answer.json()["token"]
    errors: list[str] = []

    def claim_and_skip() -> None:
        with requests.Session() as session:
            session.headers["Authorization"] = f"Token {token}"
            for _ in range(3):
                item = session.get(f"{base}/api/projects/{slug}/queue/next/", timeout=120)
                if item.status_code != 200:
                    errors.append(f"queue/next/ answered {item.status_code}")
                    return
                session.post(f"{base}/api/projects/{slug}/queue/skip/", json={"pair_id": item.json()["pair_id"]},
                             timeout=120)

    clients = [threading.Thread(target=claim_and_skip) for _ in range(2 * ARGS.web_workers)]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    if errors:
        raise RuntimeError(f"warm-up: {errors[0]} ({len(errors)} failed); see {OUT / 'gunicorn.log'}")


# --- the report -----------------------------------------------------------------------------------------------


LOGINS = ("POST /api/token/", "POST /accounts/login/")


def latency_table(samples: list) -> tuple[dict[str, dict], float]:
    """Per endpoint: requests, failures, p50/p95/p99/max over the whole run, and p95 of the requests started
    after the last login had been answered: every user logs in within the first seconds (a password hash each,
    about 0.5 s of CPU), which real experts do not all do at once."""
    logins_done = max((start + ms / 1000 for start, name, ms, _ in samples if name in LOGINS), default=0.0)
    rows: dict[str, dict] = {}
    for name in sorted({s[1] for s in samples}):
        mine = [s for s in samples if s[1] == name]
        times = [s[2] for s in mine]
        later = [s[2] for s in mine if s[0] >= logins_done]
        rows[name] = {
            "n": len(mine), "failures": sum(1 for s in mine if not s[3]),
            "p50": bench_queue.percentile(times, 50), "p95": bench_queue.percentile(times, 95),
            "p99": bench_queue.percentile(times, 99), "max": max(times),
            "later_n": len(later), "later_p95": bench_queue.percentile(later, 95) if later else None,
        }
    print(f"\n{'endpoint':<22} {'requests':>8} {'failures':>8} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
          f"{'max ms':>8}   after the last login: p95 ms (requests)")
    for name, r in rows.items():
        later = f"{r['later_p95']:8.0f} ({r['later_n']})" if r["later_n"] else "       -"
        print(f"{name:<22} {r['n']:>8} {r['failures']:>8} {r['p50']:>8.0f} {r['p95']:>8.0f} {r['p99']:>8.0f} "
              f"{r['max']:>8.0f}   {later}")
    return rows, logins_done


def label_check(project: Project) -> dict[str, int]:
    """What the clients were told was stored (submitted.tsv) against the labels in the database."""
    acknowledged = set()
    submitted = OUT / "submitted.tsv"
    if submitted.exists():
        for line in submitted.read_text().splitlines():
            username, pair_id, key, _ = line.split("\t")
            acknowledged.add((username, int(pair_id), key))
    current = list(Label.objects.filter(pair__project=project, superseded_at__isnull=True)
                   .values_list("annotator__username", "pair_id", "client_key"))
    stored = set(current)
    per_annotator_pair = Counter((user, pair) for user, pair, _ in current)
    per_key = Counter((user, key) for user, _, key in current if key)
    per_pair = Counter(pair for _, pair, _ in current)
    bench_labels = {row for row in stored if row[0].startswith("load-expert")}
    return {
        "acknowledged": len(acknowledged),
        "stored": len(bench_labels),
        "lost": len(acknowledged - stored),
        "duplicated": sum(n - 1 for n in per_annotator_pair.values() if n > 1)
        + sum(n - 1 for n in per_key.values() if n > 1),
        "over_overlap": sum(1 for n in per_pair.values() if n > project.labels_per_item),
        "unacknowledged": len(bench_labels - acknowledged),
        "leases": Lease.objects.filter(pair__project=project, skipped=False).count(),
    }


def verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


# --- the run --------------------------------------------------------------------------------------------------


def run(project: Project, base: str, password: str) -> None:
    judge = judge_create(project=project, name="load-stub", backend="openai", model="stub", method="tok",
                         endpoint=STUB_ENDPOINT, timeout_s=10, max_retries=2)
    job, _ = scoring_request(project=project, judge=judge)
    env = {"LOAD_PROJECT": project.slug, "LOAD_PASSWORD": password, "LOAD_OUT": str(OUT),
           "LOAD_EXPERTS": str(ARGS.experts), "LOAD_VIEWERS": str(ARGS.viewers),
           "LOAD_THINK_MIN": str(THINK_S[0]), "LOAD_THINK_MAX": str(THINK_S[1])}
    users = ARGS.experts + ARGS.viewers
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "-u", str(users),
            "-r", str(ARGS.spawn_rate), "--run-time", f"{ARGS.duration}s", "--host", base, "--only-summary",
            "--exit-code-on-error", "0"]
    print(f"locust: {ARGS.experts} experts + {ARGS.viewers} viewers, {ARGS.spawn_rate:g} users/s, "
          f"{ARGS.duration} s; scoring job {job.id} over {job.total:,} pairs")
    locust = start("locust", argv, **env)
    started = time.monotonic()
    done_before = ScoringJob.objects.get(id=job.id).done
    try:
        while locust.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                locust.wait(10)
            if time.monotonic() - started > ARGS.duration + 120:
                print("locust did not stop on its own: stopped")
                break
            job.refresh_from_db()
            labels = Label.objects.filter(pair__project=project, annotator__username__startswith="load-expert").count()
            print(f"  {time.monotonic() - started:5.0f} s  labels {labels:5d}  scoring {job.done:,}/{job.total:,} "
                  f"({job.status})  load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        stop(locust)
    elapsed = time.monotonic() - started
    job.refresh_from_db()

    result = json.loads((OUT / "samples.json").read_text()) if (OUT / "samples.json").exists() else None
    if result is None:
        print(f"locust wrote no samples; see {OUT / 'locust.log'}")
        return
    rows, logins_done = latency_table(result["samples"])
    first = min(start for start, *_ in result["samples"])
    print(f"the last login was answered {logins_done - first:.1f} s into the run")
    failures = Counter(f"{name}: {message}" for name, message in result["failures"])
    errors = sum(failures.values())
    print(f"\nerrors: {errors}")
    for message, n in failures.most_common(10):
        print(f"  {n:5d} x {message}")
    check = label_check(project)
    print(f"\nlabels: {check['acknowledged']} acknowledged to the clients, {check['stored']} current in the database; "
          f"lost {check['lost']}, duplicated {check['duplicated']}, items over k = {project.labels_per_item}: "
          f"{check['over_overlap']}; stored but not acknowledged (in flight at the end) {check['unacknowledged']}; "
          f"leases held {check['leases']}")
    progress = job_progress(job)
    speed = f", {progress.pairs_per_s:.0f} pairs/s" if progress.pairs_per_s else ""
    print(f"scoring job {job.id}: {job.status}, {job.done:,}/{job.total:,} pairs scored ({job.failed} failed){speed}; "
          f"{job.done - done_before:,} of them during the {elapsed:.0f} s of load; {progress.calls:,} LLM calls "
          f"({STUB.requests:,} requests reached the stub)")

    print("\ntargets (latency: the requests after the last login; whole run in brackets)")
    for label, name, target in (("next", "GET queue/next/", TARGET_NEXT_P95_MS),
                                ("submit", "POST labels/", TARGET_SUBMIT_P95_MS)):
        row = rows.get(name, {})
        p95 = row.get("later_p95")
        shown = f"{p95:.0f} ms ({row['p95']:.0f} ms)" if p95 is not None else "- (no request after the last login)"
        print(f"  {verdict(p95 is not None and p95 < target)}  {label} p95 {shown} < {target:g} ms")
    print(f"  {verdict(errors == 0)}  errors {errors} = 0")
    print(f"  {verdict(check['lost'] == 0)}  lost labels {check['lost']} = 0")
    print(f"  {verdict(check['duplicated'] == 0)}  duplicated labels {check['duplicated']} = 0")
    print(f"  {verdict(check['over_overlap'] == 0)}  items over their overlap {check['over_overlap']} = 0")


def main() -> None:
    sys.stdout.reconfigure(line_buffering=True)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # run the cleanup below
    # A script started in the background inherits SIGINT ignored: let `kill -INT` stop it like Ctrl-C does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    shutil.rmtree(OUT, ignore_errors=True)
    OUT.mkdir(parents=True)
    broker = redis.Redis.from_url(BROKER_URL)
    leftovers, others = broker_keys(broker)
    if others:
        sys.exit(f"Redis database {ARGS.broker_db} holds keys that are not Celery's ({others[:3]}...): pass "
                 "another --broker-db")
    if leftovers:
        broker.delete(*leftovers)  # an earlier bench run's messages: their chunks are in a dropped database
    password = secrets.token_urlsafe(16)
    processes: list[subprocess.Popen] = []
    threading.Thread(target=STUB.serve_forever, args=(0.1,), daemon=True).start()
    database_create()
    try:
        call_command("migrate", verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        started = time.perf_counter()
        project = seed(password)
        with connection.cursor() as cursor:
            cursor.execute("SHOW server_version")
            server = cursor.fetchone()[0]
        print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; PostgreSQL {server}, "
              f"Redis {broker.info()['redis_version']}; database {connection.settings_dict['NAME']}")
        print(f"project {project.slug}: {project.pairs.count():,} pairs, {ARGS.gold} labelled twice, k = "
              f"{project.labels_per_item}, mix {project.queue_mix}; seeded in {time.perf_counter() - started:.0f} s")
        base = f"http://127.0.0.1:{free_port()}"
        processes.append(start("worker", [sys.executable, "-m", "celery", "-A", "annotator", "worker", "-l", "info",
                                          "-n", f"load-bench-{os.getpid()}@%h"]))
        # --preload: the master imports the application once before forking, as production setups do.
        processes.append(start("gunicorn", [sys.executable, "-m", "gunicorn", "annotator.wsgi:application",
                                            "--workers", str(ARGS.web_workers), "--bind", base.removeprefix("http://"),
                                            "--preload", "--no-control-socket"]))
        wait_for("the Celery worker", lambda: " ready." in (OUT / "worker.log").read_text(), processes[0],
                 "worker.log")
        wait_for("gunicorn", lambda: answers(f"{base}/accounts/login/"), processes[1], "gunicorn.log")
        print(f"gunicorn: {ARGS.web_workers} workers on {base} (DEBUG=0); Celery worker on Redis database "
              f"{ARGS.broker_db}; LLM stub on {STUB.base_url}")
        started = time.perf_counter()
        warm_up(base, project.slug, password)
        print(f"warm-up: {time.perf_counter() - started:.1f} s")
        run(project, base, password)
    finally:
        for proc in reversed(processes):
            stop(proc)
        STUB.shutdown()
        leftovers, _ = broker_keys(broker)
        if leftovers:
            broker.delete(*leftovers)
        if ARGS.keep:
            print(f"kept database {connection.settings_dict['NAME']}")
        else:
            database_drop()
        print(f"logs: {OUT}")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted: stopped the processes and dropped the bench database")
