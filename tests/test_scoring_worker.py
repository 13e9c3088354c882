"""Real Celery workers as separate processes score a 3-query x 20-passage project with the SmolLM2 Tok judge;
one is killed mid-job, another finishes it, and no pair is judged twice."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from labeling.models import Judgment, ScoringJob
from labeling.services.scoring import scoring_job_create, scoring_job_resume
from tests.scoring_fixtures import small_scoring_project, smollm2_judge

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[1]


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


def start_worker(env, log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "annotator", "worker", "--pool", "solo", "--loglevel", "INFO",
         "--without-heartbeat", "--without-gossip", "--without-mingle"],
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
    second = start_worker(broker, second_log)
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
