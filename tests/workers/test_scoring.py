"""Real Celery workers as separate processes: killed with SIGKILL mid-job, the job still finishes once the sweep
(Celery beat in the next worker) brings the lost chunk back; no pair is judged twice and every model call counts."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from labeling.models import Judgment, ScoringJob
from labeling.selectors.scoring import job_progress
from labeling.services.judges import judge_create
from labeling.services.scoring import scoring_job_create, scoring_job_resume
from tests.endpoints import declare_endpoint, endpoints_env
from tests.models_llm.fake_openai import FakeOpenAI, Reply, completion
from tests.scoring_fixtures import small_scoring_project, smollm2_judge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.fixture
def broker(private_broker):
    """Worker processes and this test share a broker of their own (a folder, or the configured Redis)."""
    env = {**os.environ, "DATABASE_URL": database_url(), "DEBUG": "1", "SCORING_CHUNK_PAIRS": "5"}
    if private_broker is not None:
        env["CELERY_BROKER_DIR"] = str(private_broker)
    return env


def start_worker(env, log: Path, *, beat: bool = False) -> subprocess.Popen:
    """A worker process; with `beat`, Celery beat runs inside it (the sweep of lost chunks)."""
    extra = ["--beat", "--schedule", str(log.with_suffix(".beat"))] if beat else []
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "annotator", "worker", "--pool", "solo", "--loglevel", "INFO",
         "--without-heartbeat", "--without-gossip", "--without-mingle", *extra],
        cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT,
    )


def wait_for(job: ScoringJob, condition, timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if condition(job):
            return
        time.sleep(0.5)
    pytest.fail(f"timed out: job {job.status} {job.done}/{job.total}; worker log:\n{log.read_text()[-3000:]}")


def test_killed_worker_then_another_completes_the_job_without_duplicates(tmp_path, broker):
    project = small_scoring_project(tmp_path / "b", queries=3, passages=20)
    judge = smollm2_judge(project)
    job = scoring_job_create(project=project, judge=judge, chunk_pairs=5)
    assert job.total == 60 and job.chunks.count() == 12
    first_log, second_log = tmp_path / "worker1.log", tmp_path / "worker2.log"
    first = start_worker(broker, first_log)
    try:
        wait_for(job, lambda j: j.done >= 5, 240, first_log)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    job.refresh_from_db()
    assert job.status == ScoringJob.Status.RUNNING and job.done < 60, "the worker finished before it was killed"
    # The killed worker's chunk is still claimed by it: the sweep takes it back once the claim stops moving. The
    # stall time is most of what this test waits, and it can be short: the sweep runs in this solo worker between
    # two chunks, never while the worker holds one.
    second = start_worker({**broker, "SCORING_STALL_SECONDS": "8", "SCORING_SWEEP_SECONDS": "1",
                           "SCORING_CHUNK_MAX_ATTEMPTS": "10"}, second_log, beat=True)
    try:
        scoring_job_resume(job=job)  # what `manage.py score` does for the judge's unfinished job
        wait_for(job, lambda j: j.status == ScoringJob.Status.DONE, 300, second_log)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    judgments = Judgment.objects.filter(judge=judge)
    assert job.done == job.total == 60 and job.failed == 0
    assert judgments.count() == 60 and judgments.values("pair").distinct().count() == 60
    assert set(judgments.values_list("status", flat=True)) == {"ok"}
    assert scoring_job_create(project=project, judge=judge).total == 0  # a second run writes nothing new


def test_sigkill_mid_chunk_the_sweep_finishes_the_job_and_every_call_is_counted(tmp_path, broker):
    """An OpenAI-compatible server that answers slowly; the worker is killed while a part of a chunk is with
    the model. The next worker's sweep queues the chunk again: the parts written before the kill are not asked
    again, only the part that was in flight, and the job's calls equal the requests the server received."""
    project = small_scoring_project(tmp_path / "b", queries=2, passages=10)
    with FakeOpenAI(default=lambda body: Reply(body=completion("[Guess]: Yes\n[Confidence]: 0.7", 10, 5),
                                               delay=0.4)) as server:
        judge = judge_create(project=project, name="slow", backend="openai", model="m", method="ask",
                             endpoint=declare_endpoint(server.base_url), concurrency=2, max_retries=0)
        job = scoring_job_create(project=project, judge=judge, chunk_pairs=10)
        env = {**broker, "LLM_ENDPOINTS": endpoints_env(), "SCORING_WRITE_PAIRS": "2",
               "SCORING_STALL_SECONDS": "3", "SCORING_SWEEP_SECONDS": "1"}
        first_log, second_log = tmp_path / "worker1.log", tmp_path / "worker2.log"
        first = start_worker(env, first_log)
        try:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                chunk = job.chunks.order_by("id").first()
                if chunk.written >= 4 and chunk.in_flight and server.in_flight == 2:
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"the worker never got mid-chunk; log:\n{first_log.read_text()[-3000:]}")
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        chunk = job.chunks.order_by("id").first()
        written_before = set(chunk.pair_ids[:chunk.written])
        in_flight = set(chunk.pair_ids[chunk.written:chunk.written + chunk.in_flight])
        assert chunk.finished_at is None and chunk.claimed_by and len(in_flight) == 2
        second = start_worker(env, second_log, beat=True)
        try:
            wait_for(job, lambda j: j.status == ScoringJob.Status.DONE, 180, second_log)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(timeout=60)
        asked = [body["messages"][-1]["content"] for body in server.bodies]
    judgments = Judgment.objects.filter(judge=judge)
    assert job.done == job.total == 20 and job.failed == 0
    assert judgments.count() == 20 and set(judgments.values_list("status", flat=True)) == {"ok"}
    texts = {pair.id: (pair.query.text, pair.passage.text) for pair in project.pairs.select_related("query", "passage")}
    times_asked = {pair_id: sum(query in prompt and passage in prompt for prompt in asked)
                   for pair_id, (query, passage) in texts.items()}
    assert all(n >= 1 for n in times_asked.values())
    assert all(times_asked[pair_id] == 1 for pair_id in written_before)  # written parts: never asked again
    assert {pair_id for pair_id, n in times_asked.items() if n > 1} <= in_flight  # only the lost part twice
    progress = job_progress(job)
    assert progress.calls == len(asked) and progress.lost_calls == 2
    assert job.chunks.order_by("id").first().lost_workers == 1
