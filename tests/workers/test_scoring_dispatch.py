"""Two scoring jobs of different speeds on one real worker take turns: neither waits while the other runs beyond one
window (issue #48: in the demo, MiniLM's job sat "queued (next)" for 13 minutes while only SmolLM2's chunks ran). A
raised priority is the raised job's: the other jobs of its project do not fill the share it widens."""
from __future__ import annotations

import time

import pytest

import annotator.broker
from labeling.llm_adapter import judge_method
from labeling.models import Judgment, Pair, ScoringChunk, ScoringJob
from labeling.services import scoring_chunks
from labeling.services.judging import Usage
from labeling.services.scoring import scoring_dispatch, scoring_job_create, scoring_job_priority_set
from labeling.services.scoring_dispatch import WINDOW_SCALE_MAX
from models_llm.types import Verdict
from tests.factories import PairFactory, ProjectFactory, QueryFactory
from tests.polling import wait_for
from tests.scoring_fixtures import minilm_judge, small_scoring_project

WINDOW = 2
# Seconds a judge takes per pair: the slow one's chunk is SCORING_CHUNK_SECONDS long, the fast one's far shorter.
SLOW_S, FAST_S = 0.25, 0.002
SLOW_CHUNKS, FAST_CHUNKS = 6, 40


class BootClock:
    """The broker's clock (seconds since the machine booted), standing just below 10,000 s until `cross()` moves it
    past: the count of milliseconds in kombu's message names gains a digit there, 2 h 47 min after boot."""

    def __init__(self) -> None:
        self.offset = 9_990 - time.monotonic()

    def __call__(self) -> float:
        return time.monotonic() + self.offset

    def cross(self) -> None:
        self.offset = 10_010 - time.monotonic()


@pytest.fixture
def judges_of_known_speed(monkeypatch):
    """Judges answer after a fixed time per pair, by name ("slow", "fast"), instead of running a model."""
    def judge_pairs(*, judge, pairs, definitions):
        time.sleep((SLOW_S if judge.name == "slow" else FAST_S) * len(pairs))
        method = judge_method(judge)
        return [Verdict(pair_id=pair.id, status="ok", method=method, p=0.5) for pair in pairs], Usage()

    monkeypatch.setattr(scoring_chunks, "judge_pairs", judge_pairs)


def _longest_run(order: list[str], job: str, *, between: str) -> int:
    """The most chunks of `job` run one after another while chunks of `between` were still to come."""
    last = max(i for i, name in enumerate(order) if name == between)
    runs, run = [0], 0
    for name in order[:last]:
        run = run + 1 if name == job else 0
        runs.append(run)
    return max(runs)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_fast_and_a_slow_job_on_one_worker_take_turns_within_a_window(
        request, tmp_path, settings, monkeypatch, private_broker, judges_of_known_speed):
    settings.SCORING_WINDOW_CHUNKS, settings.SCORING_CHUNK_SECONDS = WINDOW, SLOW_S
    settings.SCORING_WRITE_PAIRS = 1
    clock = BootClock()
    monkeypatch.setattr(annotator.broker, "monotonic", clock)
    project = small_scoring_project(tmp_path / "b", queries=1, passages=FAST_CHUNKS + SLOW_CHUNKS)
    pair_ids = list(Pair.objects.filter(project=project).order_by("id").values_list("id", flat=True))
    # As `manage.py demo_judges` does before the workers start: the fast job sends its window, the slow one waits for
    # a place in the project's share; the clock then crosses 10,000 s, as it did during the demo.
    fast = scoring_job_create(project=project, judge=minilm_judge(project, "fast"), scope="selection",
                              pair_ids=pair_ids[:FAST_CHUNKS], chunk_pairs=1)
    slow = scoring_job_create(project=project, judge=minilm_judge(project, "slow"), scope="selection",
                              pair_ids=pair_ids[FAST_CHUNKS:], chunk_pairs=1)
    assert fast.chunks.filter(dispatched_at__isnull=False).count() == WINDOW
    assert not slow.chunks.filter(dispatched_at__isnull=False).exists()
    clock.cross()
    request.getfixturevalue("worker")

    jobs = ScoringJob.objects.filter(id__in=[fast.id, slow.id])
    wait_for(lambda: set(jobs.values_list("status", flat=True)) == {ScoringJob.Status.DONE},
             "the two jobs did not finish", seconds=60, every=0.1)
    assert Judgment.objects.filter(status="ok").count() == FAST_CHUNKS + SLOW_CHUNKS
    # One worker runs one chunk at a time: the order they were written in is the order they were taken in.
    names = {fast.id: "fast", slow.id: "slow"}
    order = [names[job_id] for job_id in ScoringChunk.objects.order_by("finished_at", "id")
             .values_list("job_id", flat=True)]
    # The fast job never waits for more than one window of the slow one, nor the slow job for more than one window
    # of the fast one (its chunks count as fractions of a chunk of the share: up to WINDOW_SCALE_MAX each).
    assert _longest_run(order, "slow", between="fast") <= WINDOW, order
    assert _longest_run(order, "fast", between="slow") <= WINDOW * WINDOW_SCALE_MAX, order
    assert order.index("slow") <= WINDOW, order


@pytest.mark.django_db
def test_a_raised_priority_sends_the_raised_jobs_chunks_and_not_the_others(settings,
                                                                           django_capture_on_commit_callbacks):
    """The demo's case: MiniLM's last chunks waited; staff raised its priority to 10, which widened the project's
    share tenfold, and SmolLM2's job filled it, so that all it sent later waited behind SmolLM2's."""
    settings.SCORING_WINDOW_CHUNKS = WINDOW
    project = ProjectFactory()
    query = QueryFactory(project=project)
    pairs = [PairFactory(project=project, query=query).id for _ in range(35)]
    with django_capture_on_commit_callbacks(execute=False):
        slow = scoring_job_create(project=project, judge=minilm_judge(project, "slow"), scope="selection",
                                  pair_ids=pairs[:30], chunk_pairs=1)
        fast = scoring_job_create(project=project, judge=minilm_judge(project, "fast"), scope="selection",
                                  pair_ids=pairs[30:], chunk_pairs=1)

    def sent(job: ScoringJob) -> int:
        return job.chunks.filter(dispatched_at__isnull=False, finished_at__isnull=True).count()

    assert (sent(slow), sent(fast)) == (WINDOW, 0)
    with django_capture_on_commit_callbacks(execute=False) as sending:
        scoring_job_priority_set(job=fast, priority=10, by=None)
    # Sent at once, all five: the raised job's; the slow job keeps its one window.
    assert (sent(slow), sent(fast)) == (WINDOW, 5) and len(sending) == 1
    # A slow chunk written: its place goes to the slow job again, and no more.
    chunk = slow.chunks.filter(dispatched_at__isnull=False).order_by("id").first()
    with django_capture_on_commit_callbacks(execute=False):
        ScoringChunk.objects.filter(id=chunk.id).update(written=1, finished_at=chunk.dispatched_at)
        scoring_dispatch(job=slow)
    assert (sent(slow), sent(fast)) == (WINDOW, 5)
