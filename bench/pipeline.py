"""The worker side of judging at scale: pairs/s end to end of real Celery worker processes scoring an `openai`
Tok judge against a local OpenAI-compatible stub that answers at once, so that only the worker's own work (the
broker, the database, building prompts, HTTP, parsing, writing judgments) limits the rate.

A measurement, not a test: it prints the figures and PASS/MISS, and exits 0 once it has run.

    DEBUG=1 .venv/bin/python bench/pipeline.py                      # 20,000 pairs, 1 then 4 workers
    DEBUG=1 .venv/bin/python bench/pipeline.py --pairs 4000 --workers 1

Without DATABASE_URL it works in a fresh SQLite file and a filesystem broker in a temporary folder (deleted at
the end); with DATABASE_URL (migrated first) and CELERY_BROKER_URL (Redis) it uses those and leaves its project
`pipeline-<time>` behind unless --drop. It measures, one after the other:
  1. the stub alone (in a process of its own): the requests/s one client process gets from it, and its own CPU
     per request, whose inverse is the most it can answer on one core;
  2. for each --workers count: that many `celery worker --pool solo` processes, ready before the clock starts;
     a scoring job of a fresh Tok judge over every pair, timed from scoring_request to the job's DONE; every
     pair must have an ok judgment, and the stub must have answered one request per pair;
  3. when one worker misses the target (or with --profile): one chunk scored in this process without the broker,
     then one under cProfile (CPU time, every thread of the judge's pool included): where a worker's time goes.
Target: one worker process >= 300 pairs/s.
"""
from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import cProfile
import io
import json
import logging
import math
import os
import pstats
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
# bench/queue.py would shadow the standard library's queue (which Celery and Django import) for a script run
# from bench/: the repository root takes its place.
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
DATA = ROOT / "data" / "climretrieve"

TARGET_PAIRS_PER_S = 300.0
STUB_ENDPOINT = "pipeline-stub"
# Defaults the bench sets unless the environment does: a chunk of 200 pairs (half a query's 400 passages) and
# parts of 50 keep the per-chunk and per-part database work small against the pairs it carries.
SCORING_DEFAULTS = {"SCORING_CHUNK_PAIRS": "200", "SCORING_WRITE_PAIRS": "50"}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=20_000, help="pairs in the project (rounded to whole queries)")
    parser.add_argument("--passages", type=int, default=400, help="passages per query (at most 446, ClimRetrieve's)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4], help="worker process counts, in turn")
    parser.add_argument("--concurrency", type=int, default=16, help="the judge's concurrent requests per worker")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds a job may take before it is cut off")
    parser.add_argument("--profile", action="store_true", help="profile one chunk even when the target is met")
    parser.add_argument("--drop", action="store_true", help="on DATABASE_URL, delete the project at the end")
    parser.add_argument("--serve-stub", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


# --- the stub: its own process, asyncio, answers precomputed --------------------------------------------------

def _completion_parts(p: float) -> tuple[bytes, bytes]:
    """A Tok completion with P(Yes) = p and 20 top_logprobs (what vLLM sends for top_logprobs=20), split where
    the prompt token count goes."""
    top = [{"token": "Yes", "logprob": math.log(p), "bytes": list(b"Yes")},
           {"token": "No", "logprob": math.log(1 - p), "bytes": list(b"No")}]
    top += [{"token": f"tok{i}", "logprob": -12.0 - i, "bytes": list(f"tok{i}".encode())} for i in range(18)]
    first = top[0] if p >= 0.5 else top[1]
    body = json.dumps({
        "id": "chatcmpl-pipeline", "object": "chat.completion", "created": 1700000000, "model": "stub",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": first["token"]},
                     "finish_reason": "length", "logprobs": {"content": [{**first, "top_logprobs": top}]}}],
        "usage": {"prompt_tokens": 999999999, "completion_tokens": 1, "total_tokens": 1},
    }).encode()
    head, tail = body.split(b"999999999")
    return head, tail


_ANSWERS = [_completion_parts((k + 0.5) / 100) for k in range(100)]


def _http(status: str, body: bytes) -> bytes:
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body)


class _StubProtocol(asyncio.Protocol):
    """HTTP/1.1 keep-alive, one request after another per connection; P(Yes) from the body's CRC (the same
    prompt always gets the same answer), prompt tokens as characters / 4."""

    requests = 0
    last = b"{}"

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.buffer = bytearray()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            at = head.find(b"content-length:")
            length = 0
            if at >= 0:
                stop = head.find(b"\r\n", at)
                length = int(head[at + 15:stop if stop >= 0 else len(head)])
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4:end + 4 + length])
            del self.buffer[:end + 4 + length]
            self.transport.write(self._answer(head[:head.find(b"\r\n")], body))

    def _answer(self, request_line: bytes, body: bytes) -> bytes:
        if request_line.startswith(b"post /v1/chat/completions"):
            _StubProtocol.requests += 1
            _StubProtocol.last = body
            head, tail = _ANSWERS[zlib.crc32(body) % len(_ANSWERS)]
            return _http("200 OK", head + str(len(body) // 4).encode() + tail)
        if request_line.startswith(b"get /stats"):
            stats = {"requests": _StubProtocol.requests, "cpu_s": time.process_time()}
            return _http("200 OK", json.dumps(stats).encode())
        if request_line.startswith(b"get /last"):
            return _http("200 OK", _StubProtocol.last)
        return _http("404 Not Found", b'{"error": {"message": "no such route"}}')


def serve_stub() -> None:
    """Serve on a free port of 127.0.0.1 and print it; runs until killed."""
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_StubProtocol, "127.0.0.1", 0)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


ARGS = parse_args()
if ARGS.serve_stub:
    serve_stub()
    sys.exit(0)

WORKDIR = Path(tempfile.mkdtemp(prefix="annotator-pipeline-"))
STUB = subprocess.Popen([sys.executable, __file__, "--serve-stub"], stdout=subprocess.PIPE, text=True)
atexit.register(shutil.rmtree, WORKDIR, ignore_errors=True)
atexit.register(STUB.kill)
STUB_URL = f"http://127.0.0.1:{int(STUB.stdout.readline())}/v1"

os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "annotator.settings")
if not os.environ.get("DATABASE_URL"):
    os.environ["DATABASE_URL"] = f"sqlite:///{WORKDIR / 'pipeline.sqlite3'}"
if not os.environ.get("CELERY_BROKER_URL"):
    os.environ["CELERY_BROKER_DIR"] = str(WORKDIR / "broker")
for _name, _value in SCORING_DEFAULTS.items():
    os.environ.setdefault(_name, _value)
os.environ["LLM_ENDPOINTS"] = json.dumps({STUB_ENDPOINT: {"base_url": STUB_URL, "allow_local": True}})

import django

django.setup()

import httpx2
from django.conf import settings

from labeling.llm_adapter import pair_inputs, scorer_for
from labeling.models import Judge, Judgment, Pair, Project, ScoringJob
from labeling.selectors.definitions import current_definition
from labeling.services.bundle_import import bundle_import
from labeling.services.judges import judge_create
from labeling.services.scoring import scoring_chunk_run, scoring_job_create, scoring_request

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
# The app logs at INFO (httpx2 a line per request): to a file, as a worker's log goes, not over the figures.
logging.getLogger().handlers[:] = [logging.FileHandler(WORKDIR / "bench.log")]


def stub_stats() -> dict:
    return httpx2.get(STUB_URL.removesuffix("/v1") + "/stats", timeout=10).json()


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


# --- the project ----------------------------------------------------------------------------------------------

def build_project(pairs: int, per_query: int) -> Project:
    """ceil(pairs / per_query) queries x per_query passages, all judged: ClimRetrieve's full texts (its 16 queries
    with their definitions, cycled under new ids; its first `per_query` passages), through bundle_import."""
    queries = [json.loads(line) for line in (DATA / "queries.jsonl").read_text().splitlines() if line.strip()]
    corpus = [json.loads(line) for line in (DATA / "corpus.jsonl").read_text().splitlines() if line.strip()]
    if per_query > len(corpus):
        sys.exit(f"--passages is at most {len(corpus)}")
    folder = WORKDIR / "bundle"
    folder.mkdir()
    rows = []
    for i in range(math.ceil(pairs / per_query)):
        source = queries[i % len(queries)]
        rows.append({"_id": f"q{i:05d}", "text": source["text"], "definition": source.get("definition", "")})
    docs = [{"_id": doc["_id"], "title": doc.get("title", ""), "text": doc["text"]} for doc in corpus[:per_query]]
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    lines = ["query-id\tcorpus-id"] + [f"{q['_id']}\t{d['_id']}" for q in rows for d in docs]
    (folder / "pairs.tsv").write_text("\n".join(lines) + "\n")
    slug = f"pipeline-{time.strftime('%Y%m%d-%H%M%S')}"
    bundle_import(path=folder, project_slug=slug)
    return Project.objects.get(slug=slug)


def stub_judge(project: Project, name: str) -> Judge:
    return judge_create(project=project, name=name, backend="openai", model="stub", method="tok",
                        endpoint=STUB_ENDPOINT, concurrency=ARGS.concurrency)


# --- the stub's own rate --------------------------------------------------------------------------------------

def stub_probe(body: dict, seconds: float = 3.0, threads: int = 16) -> tuple[float, float]:
    """(requests/s one client process got, stub CPU seconds per request): `threads` threads sharing one httpx2
    client (as the openai backend does) post `body` for `seconds`."""
    count = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    limits = httpx2.Limits(max_connections=threads, max_keepalive_connections=threads)
    with httpx2.Client(limits=limits, timeout=30) as client:
        def loop() -> None:
            done = 0
            while time.monotonic() < deadline:
                client.post(STUB_URL + "/chat/completions", json=body).raise_for_status()
                done += 1
            with lock:
                count[0] += done

        before = stub_stats()
        started = time.monotonic()
        pool = [threading.Thread(target=loop) for _ in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        elapsed = time.monotonic() - started
        after = stub_stats()
    served = after["requests"] - before["requests"]
    return count[0] / elapsed, (after["cpu_s"] - before["cpu_s"]) / max(served, 1)


def tok_body(project: Project) -> dict:
    """The request body the openai backend sends for one of the project's pairs, as the stub received it."""
    pair = Pair.objects.filter(project=project).select_related("query", "passage").first()
    definition = current_definition(query=pair.query_id)
    inputs = pair_inputs([pair], {pair.query_id: definition.text if definition else None})
    scorer_for(stub_judge(project, "pipeline-probe")).score(inputs)
    return httpx2.get(STUB_URL.removesuffix("/v1") + "/last", timeout=10).json()


# --- worker processes -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunResult:
    workers: int
    pairs: int
    ok: int
    wall_s: float
    db_s: float
    requests: int
    worker_cpu_s: float
    stub_cpu_s: float
    status: str

    @property
    def rate(self) -> float:
        return self.pairs / self.wall_s


def start_worker(index: int) -> tuple[subprocess.Popen, Path]:
    log = WORKDIR / f"worker{index}.log"
    argv = [sys.executable, "-m", "celery", "-A", "annotator", "worker", "--pool", "solo", "--loglevel", "INFO",
            "-n", f"pipeline{index}@%h", "--without-heartbeat", "--without-gossip", "--without-mingle"]
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=os.environ.copy(), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    return proc, log


def stop_worker(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def wait_ready(workers: list[tuple[subprocess.Popen, Path]], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    for proc, log in workers:
        while " ready." not in log.read_text():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready; the end of {log}:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)


def run(project: Project, count: int) -> RunResult:
    """`count` workers, ready first; then a job of a fresh judge over every pair, timed to DONE."""
    judge = stub_judge(project, f"pipeline-{count}-workers")
    workers = [start_worker(i) for i in range(count)]
    try:
        wait_ready(workers)
        before, cpu_before = stub_stats(), [cpu_seconds(proc.pid) for proc, _ in workers]
        started = time.monotonic()
        job, _ = scoring_request(project=project, judge=judge)
        while time.monotonic() - started < ARGS.timeout:
            job.refresh_from_db()
            if job.status != ScoringJob.Status.RUNNING:
                break
            time.sleep(0.1)
        wall = time.monotonic() - started
        cpu = sum(cpu_seconds(proc.pid) for proc, _ in workers) - sum(cpu_before)
        after = stub_stats()
    finally:
        for proc, _ in workers:
            stop_worker(proc)
    job.refresh_from_db()
    ok = Judgment.objects.filter(judge=judge, status=Judgment.Status.OK).values("pair_id").distinct().count()
    db_s = (job.finished_at - job.started_at).total_seconds() if job.finished_at and job.started_at else math.nan
    return RunResult(workers=count, pairs=job.done, ok=ok, wall_s=wall, db_s=db_s,
                     requests=after["requests"] - before["requests"], worker_cpu_s=cpu,
                     stub_cpu_s=after["cpu_s"] - before["cpu_s"], status=job.status)


# --- profile of one chunk, in this process --------------------------------------------------------------------

# (label, file the function is in, function) of the steps a chunk's CPU goes to, for the profile's summary.
HOT_SPOTS = [
    ("scoring_chunk_run (this thread, all of it)", "labeling/services/scoring_chunks.py", "scoring_chunk_run"),
    ("  claim the chunk", "labeling/services/scoring_chunks.py", "_chunk_claim"),
    ("  judge_pairs (waits for the request threads)", "labeling/services/judging.py", "judge_pairs"),
    ("  write a part (_part_write)", "labeling/services/scoring_chunks.py", "_part_write"),
    ("    judgments_upsert", "labeling/services/judging.py", "judgments_upsert"),
    ("    validation_request", "labeling/services/validation.py", "validation_request_refresh"),
    ("  SQL statements kept for DEBUG (debug_sql)", "django/db/backends/utils.py", "debug_sql"),
    ("one pair in a request thread (_score_one)", "models_llm/backends/openai.py", "_score_one"),
    ("  build_prompt", "models_llm/prompts.py", "build_prompt"),
    ("  HTTP POST (httpx2 Client.post, JSON both ways)", "httpx2/_client.py", "post"),
    ("  read the answer (_tok_verdict)", "models_llm/backends/openai.py", "_tok_verdict"),
    ("logging (Logger._log, every thread)", "logging/__init__.py", "_log"),
]


def _chunk_here(project: Project, name: str, pair_ids: list[int]) -> tuple[int, Judge]:
    """A one-chunk job of a fresh judge over `pair_ids`, whose chunk this process will run: its message is not
    sent (no worker runs now, and a broker nobody empties would keep it)."""
    judge = stub_judge(project, name)
    with mock.patch("labeling.services.scoring_dispatch.scoring_chunks_enqueue"):
        job = scoring_job_create(project=project, judge=judge, scope=ScoringJob.Scope.SELECTION, pair_ids=pair_ids,
                                 chunk_pairs=len(pair_ids))
    return job.chunks.get().id, judge


def profile_chunks(project: Project) -> None:
    """One chunk scored here unprofiled (pairs/s without the broker), then one, of another fresh judge (so that
    its request pool's threads start under the profiler), under cProfile measuring CPU time in this thread and
    in each pool thread."""
    size = settings.SCORING_CHUNK_PAIRS
    query_id = Pair.objects.filter(project=project).order_by("query_id").values_list("query_id", flat=True)[0]
    ids = list(Pair.objects.filter(project=project, query_id=query_id).order_by("id").values_list("id", flat=True))
    plain, _ = _chunk_here(project, "pipeline-inline", ids[:size])
    profiled, judge = _chunk_here(project, "pipeline-profile", ids[:size])
    started, cpu_started, thread_started = time.monotonic(), time.process_time(), time.thread_time()
    written = scoring_chunk_run(chunk_id=plain)
    elapsed, cpu = time.monotonic() - started, time.process_time() - cpu_started
    own = time.thread_time() - thread_started
    print(f"one chunk in this process (no broker, no profiler): {written} pairs in {elapsed:.2f} s = "
          f"{written / elapsed:.0f} pairs/s; CPU {1000 * cpu / written:.2f} ms per pair = this thread (claim, "
          f"reads, writes) {1000 * own / written:.2f} + the request threads {1000 * (cpu - own) / written:.2f}")

    profiles: list[cProfile.Profile] = []

    def start_thread_profile(*_: object) -> None:
        sys.setprofile(None)
        profile = cProfile.Profile(time.thread_time)
        profiles.append(profile)
        profile.enable()

    main_profile = cProfile.Profile(time.thread_time)
    threading.setprofile(start_thread_profile)
    started, cpu_started = time.monotonic(), time.process_time()
    main_profile.enable()
    written = scoring_chunk_run(chunk_id=profiled)
    main_profile.disable()
    wall, cpu = time.monotonic() - started, time.process_time() - cpu_started
    threading.setprofile(None)
    # The pool's threads end here, so that each thread's profile is closed by the thread itself.
    scorer_for(judge).close()
    stats = pstats.Stats(main_profile)
    for profile in profiles:
        stats.add(profile)
    print(f"profiled chunk: {written} pairs, {wall:.2f} s wall, {cpu:.2f} s CPU of this process "
          f"({1000 * cpu / written:.2f} ms per pair, profiler included); {len(profiles)} pool threads profiled; "
          f"times below are CPU seconds summed over the threads")
    request_threads = sum(pstats.Stats(profile).total_tt for profile in profiles)
    print(f"  CPU per pair: {1000 * stats.total_tt / written:.2f} ms = this thread "
          f"{1000 * pstats.Stats(main_profile).total_tt / written:.2f} + the request threads "
          f"{1000 * request_threads / written:.2f}; inclusive CPU of the main steps:")
    for label, where, function in HOT_SPOTS:
        found = [(key, value) for key, value in stats.stats.items()
                 if key[0].endswith(where) and key[2] == function]
        if found:
            (path, line, _), (_, calls, _, cumulative, _) = max(found, key=lambda item: item[1][3])
            print(f"    {label:<52} {1000 * cumulative / written:6.2f} ms per pair ({calls:,} calls) "
                  f"{Path(path).relative_to(ROOT) if path.startswith(str(ROOT)) else path}:{line}")
    text = io.StringIO()
    stats.stream = text
    stats.sort_stats("tottime").print_stats(25)
    print(text.getvalue())


# --- main -----------------------------------------------------------------------------------------------------

def verdict(met: bool) -> str:
    return "PASS" if met else "MISS"


def main() -> None:
    started = time.monotonic()
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT, check=True)
    project = build_project(ARGS.pairs, ARGS.passages)
    total = Pair.objects.filter(project=project).count()
    queries = project.queries.count()
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; DEBUG={settings.DEBUG}; "
          f"database {settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[1]}; "
          f"broker {settings.CELERY_BROKER_URL.split('://')[0]}")
    print(f"project {project.slug}: {queries} queries x {ARGS.passages} passages = {total:,} pairs "
          f"(built in {time.monotonic() - started:.1f} s)")
    print(f"settings: SCORING_CHUNK_PAIRS={settings.SCORING_CHUNK_PAIRS} "
          f"SCORING_WRITE_PAIRS={settings.SCORING_WRITE_PAIRS}; judge concurrency={ARGS.concurrency}; "
          f"worker --pool solo")
    body = tok_body(project)
    client_rate, stub_cpu = stub_probe(body)
    print(f"stub alone: {client_rate:,.0f} requests/s to one client process of 16 threads; its own CPU "
          f"{1e6 * stub_cpu:.0f} us per request = {1 / stub_cpu:,.0f} requests/s on one core "
          f"(request body {len(json.dumps(body)):,} bytes)")
    results = []
    for count in ARGS.workers:
        result = run(project, count)
        results.append(result)
        print(f"{count} worker(s): {result.pairs:,} pairs {result.status}, {result.ok:,} ok, "
              f"{result.requests:,} requests to the stub; {result.wall_s:.1f} s from start to DONE "
              f"({result.db_s:.1f} s first claim to last write) = {result.rate:.0f} pairs/s; worker CPU "
              f"{1000 * result.worker_cpu_s / max(result.pairs, 1):.2f} ms per pair, busy "
              f"{result.worker_cpu_s / result.wall_s / count:.0%} of the time per worker; stub CPU "
              f"{result.stub_cpu_s:.1f} s of {result.wall_s:.1f} s; load average {os.getloadavg()[0]:.2f}")
        if result.ok != total or result.pairs != total or result.requests != total:
            print(f"   CHECK FAILED: {total - result.ok:,} pairs without an ok judgment, {result.requests:,} "
                  f"requests for {total:,} pairs")
    if results:
        one = next((r for r in results if r.workers == 1), None)
        if one is not None:
            print(f"one worker: {one.rate:.0f} pairs/s = {one.rate / TARGET_PAIRS_PER_S:.2f} x the target "
                  f"(>= {TARGET_PAIRS_PER_S:.0f}): {verdict(one.rate >= TARGET_PAIRS_PER_S)}")
            for other in results:
                if other.workers != 1:
                    print(f"{other.workers} workers / 1 worker: {other.rate / one.rate:.2f}")
        if ARGS.profile or (one is not None and one.rate < TARGET_PAIRS_PER_S):
            profile_chunks(project)
    if str(WORKDIR) not in str(settings.DATABASES["default"]["NAME"]):
        if ARGS.drop:
            project.delete()
        else:
            print(f"project {project.slug} left in the database (--drop deletes it)")


if __name__ == "__main__":
    main()
