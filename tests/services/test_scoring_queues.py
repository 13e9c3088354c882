"""Queues by kind of work, declared in one place (settings.CELERY_TASK_ROUTES): what someone waits for goes to the
interactive queue, scoring, retrieval, audits and fine-tuning to the bulk queue (a judge on a GPU to GPU_QUEUE when
the operator declares one), and a worker started without -Q consumes them all."""
from __future__ import annotations

import pytest

from annotator.celery import app
from labeling.models import Pair, ScoringChunk, ScoringJob
from labeling.services.scoring import scoring_job_cancel, scoring_job_create, scoring_job_priority_set
from labeling.services.scoring_dispatch import PriorityError, PriorityJobFinished, bulk_queue_for
from tests.factories import JudgeFactory, PairFactory, ProjectFactory, QueryFactory
from tests.scoring_fixtures import minilm_judge

INTERACTIVE = ["bundle_import_task", "validation_refresh_task", "definition_draft_task", "jobs_sweep_task",
               "round_finish_task", "systems_refresh_task"]
BULK = ["score_chunk_task", "retrieval_task", "audit_task", "finetune_task", "query_generation_task",
        "estimate_task", "replay_task"]


def _queue_of(task: str) -> str:
    return app.amqp.router.route({}, f"labeling.tasks.{task}")["queue"].name


@pytest.mark.parametrize("task", INTERACTIVE)
def test_interactive_work_goes_to_the_interactive_queue(task):
    assert _queue_of(task) == "interactive"


@pytest.mark.parametrize("task", BULK)
def test_bulk_work_goes_to_the_bulk_queue(task):
    assert _queue_of(task) == "bulk"


def test_every_task_has_a_declared_queue_and_a_plain_worker_consumes_both():
    tasks = {name.removeprefix("labeling.tasks.") for name in app.tasks if name.startswith("labeling.tasks.")}
    assert tasks == set(INTERACTIVE) | set(BULK)
    assert {"interactive", "bulk"} <= set(app.amqp.queues)


@pytest.mark.django_db
def test_a_gpu_judge_goes_to_the_gpu_queue_when_one_is_declared(settings):
    project = ProjectFactory()
    gpu = JudgeFactory(project=project, backend="hf", parameters={"method": "tok", "device": "cuda:0"})
    cpu = JudgeFactory(project=project, backend="hf", parameters={"method": "tok", "device": "cpu"})
    remote = JudgeFactory(project=project, backend="openai", parameters={"method": "ask", "device": "cuda"})
    assert [bulk_queue_for(j) for j in (gpu, cpu, remote)] == ["bulk"] * 3
    settings.GPU_QUEUE = "gpu"
    assert [bulk_queue_for(j) for j in (gpu, cpu, remote)] == ["gpu", "bulk", "bulk"]


@pytest.mark.django_db
def test_a_job_sends_one_window_and_a_raised_priority_widens_it(settings, django_capture_on_commit_callbacks):
    settings.SCORING_WINDOW_CHUNKS = 3
    project = ProjectFactory()
    query = QueryFactory(project=project)
    pairs = [PairFactory(project=project, query=query) for _ in range(20)]
    judge = minilm_judge(project)
    with django_capture_on_commit_callbacks(execute=False) as sent:
        job = scoring_job_create(project=project, judge=judge, scope="selection",
                                 pair_ids=[p.id for p in pairs], chunk_pairs=1)
    dispatched = ScoringChunk.objects.filter(job=job, dispatched_at__isnull=False).order_by("id")
    assert len(sent) == 1 and list(dispatched.values_list("id", flat=True)) == sorted(
        job.chunks.values_list("id", flat=True))[:3]
    with django_capture_on_commit_callbacks(execute=False):
        scoring_job_priority_set(job=job, priority=2, by=None)
    assert dispatched.count() == 6
    for bad in (0, 11, True, "3", 2.0):
        with pytest.raises(PriorityError):
            scoring_job_priority_set(job=job, priority=bad, by=None)
    scoring_job_cancel(job=job)
    with pytest.raises(PriorityJobFinished):
        scoring_job_priority_set(job=job, priority=3, by=None)


@pytest.mark.django_db
def test_a_job_scores_the_gold_pairs_first_then_the_runs_top_ten_then_the_rest(django_capture_on_commit_callbacks):
    from labeling.services.runs import run_store
    from tests.factories import LabelFactory, PassageFactory

    project = ProjectFactory()
    queries = [QueryFactory(project=project) for _ in range(2)]
    passages = [PassageFactory(project=project) for _ in range(30)]
    pairs = {(q.id, p.id): PairFactory(project=project, query=q, passage=p) for q in queries for p in passages}
    ids = [pair.id for pair in pairs.values()]
    referenced = pairs[(queries[1].id, passages[29].id)]
    referenced.reference_grade = 1
    referenced.save()
    LabelFactory(pair=pairs[(queries[0].id, passages[28].id)], grade=0)
    # A run ranks passages 0..14 for query 0: its top ten is passages 0..9 (scores descending).
    run_store(project=project, name="bm25", kind="bm25", parameters={},
              rankings=[(queries[0].id, [p.id for p in passages[:15]], [float(20 - i) for i in range(15)])])
    with django_capture_on_commit_callbacks(execute=False):
        job = scoring_job_create(project=project, judge=minilm_judge(project), scope="all", chunk_pairs=4)
    chunks = list(job.chunks.order_by("id"))
    order = [pair_id for chunk in chunks for pair_id in chunk.pair_ids]
    assert sorted(order) == sorted(ids) and job.total == 60
    gold = {referenced.id, pairs[(queries[0].id, passages[28].id)].id}
    top = {pairs[(queries[0].id, p.id)].id for p in passages[:10]}
    assert set(order[:2]) == gold and set(order[2:12]) == top
    # A chunk holds one query's pairs of one tier.
    assert [len(c.pair_ids) for c in chunks[:5]] == [1, 1, 4, 4, 2]
    assert all(len({pair.query_id for pair in Pair.objects.filter(id__in=c.pair_ids)}) == 1 for c in chunks)


@pytest.mark.django_db
def test_a_job_of_short_chunks_keeps_more_of_them_sent_so_that_jobs_share_the_worker_by_time(
        settings, django_capture_on_commit_callbacks):
    """MiniLM's chunks stop at SCORING_EMBEDDING_CHUNK_PAIRS and take seconds; SmolLM2's are cut to
    SCORING_CHUNK_SECONDS.
    With a window of as many chunks each, the fast judge got an eighth of the worker (`make demo`); its window
    grows by SCORING_CHUNK_SECONDS over the time its finished chunks took, up to WINDOW_SCALE_MAX (each chunk then
    counts as that fraction of a chunk of its project's share)."""
    from django.utils import timezone

    from labeling.services.scoring_dispatch import WINDOW_SCALE_MAX, chunk_seconds, scoring_dispatch, time_scale

    settings.SCORING_WINDOW_CHUNKS, settings.SCORING_CHUNK_SECONDS = 2, 30.0
    project = ProjectFactory()
    query = QueryFactory(project=project)
    pairs = [PairFactory(project=project, query=query) for _ in range(120)]
    with django_capture_on_commit_callbacks(execute=False):
        job = scoring_job_create(project=project, judge=minilm_judge(project), scope="selection",
                                 pair_ids=[p.id for p in pairs], chunk_pairs=1)
    sent = ScoringChunk.objects.filter(job=job, dispatched_at__isnull=False)
    assert chunk_seconds(job) is None and time_scale(job) == 1 and sent.count() == 2
    # Its two chunks are done: 1 pair each, one timed at 2 s, the other at 4 s (a part of a chunk that loaded the
    # model is not timed: timed_pairs 0 is left out).
    first, second = sent.order_by("id")
    ScoringChunk.objects.filter(id=first.id).update(written=1, finished_at=timezone.now(), busy_seconds=2.0,
                                                   timed_pairs=1)
    ScoringChunk.objects.filter(id=second.id).update(written=1, finished_at=timezone.now(), busy_seconds=4.0,
                                                    timed_pairs=1)
    assert chunk_seconds(job) == pytest.approx(3.0)
    with django_capture_on_commit_callbacks(execute=False):
        scoring_dispatch(job=job)
    assert time_scale(job) == 10  # 30 s / 3 s
    assert sent.filter(finished_at__isnull=True).count() == 20
    # Faster still: the scale stops at WINDOW_SCALE_MAX; slower than SCORING_CHUNK_SECONDS: never below the base.
    ScoringChunk.objects.filter(id__in=[first.id, second.id]).update(busy_seconds=0.01)
    assert time_scale(job) == WINDOW_SCALE_MAX
    ScoringChunk.objects.filter(id__in=[first.id, second.id]).update(busy_seconds=90.0)
    assert time_scale(job) == 1


@pytest.mark.django_db
def test_a_job_waiting_its_turn_is_queued_with_what_is_ahead_and_stalled_only_when_taken_work_stops(
        settings, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    from labeling.models import BundleImportJob
    from labeling.selectors.job_states import job_state, scoring_job_state
    from labeling.selectors.scoring import job_progress

    settings.SCORING_WINDOW_CHUNKS = 2
    project = ProjectFactory()
    query = QueryFactory(project=project)
    pairs = [PairFactory(project=project, query=query) for _ in range(6)]
    with django_capture_on_commit_callbacks(execute=False):
        first = scoring_job_create(project=project, judge=minilm_judge(project, "a"), scope="selection",
                                   pair_ids=[p.id for p in pairs], chunk_pairs=1)
        second = scoring_job_create(project=project, judge=minilm_judge(project, "b"), scope="selection",
                                    pair_ids=[p.id for p in pairs], chunk_pairs=1)
    hour_ago = timezone.now() - timedelta(hours=1)
    ScoringJob.objects.filter(id__in=[first.id, second.id]).update(created_at=hour_ago)
    ScoringChunk.objects.filter(job=first, dispatched_at__isnull=False).update(dispatched_at=hour_ago)
    # Nobody took anything for an hour: both wait their turn (no worker, or a busy one); neither is "stalled".
    assert (scoring_job_state(first).text, scoring_job_state(second).text) == ("queued (next)", "queued (2 ahead)")
    progress = job_progress(second)
    assert not progress.stalled and progress.state.ahead == 2
    # A worker takes one of the first job's chunks: that job runs, and one chunk less is ahead of the second.
    taken = first.chunks.filter(dispatched_at__isnull=False).order_by("id").first()
    ScoringChunk.objects.filter(id=taken.id).update(claimed_by="w:1:t", claimed_at=timezone.now())
    assert (scoring_job_state(first).text, scoring_job_state(second).text) == ("running", "queued (1 ahead)")
    # The chunk it took stops moving for longer than SCORING_STALL_SECONDS: that, and only that, is stalled.
    ScoringChunk.objects.filter(id=taken.id).update(claimed_at=hour_ago)
    assert scoring_job_state(first).name == "stalled" and job_progress(first).stalled
    # Other kinds: pending is queued behind the same kind's earlier pending jobs; a silent heartbeat is stalled.
    imports = [BundleImportJob.objects.create(project=project, file_name=f"{i}.zip", size=1) for i in range(3)]
    assert [job_state(job).text for job in imports] == ["queued (next)", "queued (1 ahead)", "queued (2 ahead)"]
    BundleImportJob.objects.filter(id=imports[0].id).update(status="running", started_at=timezone.now(),
                                                           heartbeat_at=timezone.now())
    imports[0].refresh_from_db()
    assert job_state(imports[0]).text == "running" and job_state(imports[2]).text == "queued (1 ahead)"
    BundleImportJob.objects.filter(id=imports[0].id).update(heartbeat_at=hour_ago)
    imports[0].refresh_from_db()
    assert job_state(imports[0]).text == "stalled"


@pytest.mark.django_db
def test_projects_share_the_bulk_workers_evenly_however_many_jobs_each_runs(
        tmp_path, settings, django_capture_on_commit_callbacks):
    """Issue #47, finding 9: the window was per job, so a project running three judges kept three windows in the
    queue beside another project's one and took three quarters of the workers. Each project now keeps one share;
    its jobs take turns in it, and a job that ends hands its place to the project's others at once."""
    from labeling.services.scoring import scoring_chunk_run, scoring_request
    from tests.scoring_fixtures import small_scoring_project

    # Chunks of milliseconds would count as fractions of a chunk of the share (the test above): not here.
    settings.SCORING_WINDOW_CHUNKS, settings.SCORING_CHUNK_SECONDS = 4, 1e-6
    settings.SCORING_CHUNK_PAIRS = settings.SCORING_EMBEDDING_CHUNK_PAIRS = 5
    many = small_scoring_project(tmp_path / "many", slug="many", queries=3, passages=10)
    one = small_scoring_project(tmp_path / "one", slug="one", queries=3, passages=10)
    with django_capture_on_commit_callbacks(execute=False):
        jobs = [scoring_request(project=many, judge=minilm_judge(many, f"judge-{i}"), scope="all")[0]
                for i in range(3)]
        single, _ = scoring_request(project=one, judge=minilm_judge(one), scope="all")
    assert {job.chunks.count() for job in [*jobs, single]} == {6}  # 3 queries x 10 pairs, 5 pairs a chunk
    waiting = ScoringChunk.objects.filter(dispatched_at__isnull=False, finished_at__isnull=True,
                                          job__status=ScoringJob.Status.RUNNING)

    def sent(**where) -> int:
        return waiting.filter(**where).count()

    # Per job this was 12 chunks of `many` sent (three windows of 4) beside 4 of `one`.
    assert (sent(job__project=many), sent(job__project=one)) == (4, 4)
    # The first job took the share alone when it started; each chunk it writes goes to the job furthest behind.
    for _ in range(2):
        chunk = jobs[0].chunks.filter(dispatched_at__isnull=False, finished_at__isnull=True).order_by("id").first()
        with django_capture_on_commit_callbacks(execute=False):
            assert scoring_chunk_run(chunk_id=chunk.id) == 5
    assert [sent(job=job) for job in jobs] == [2, 1, 1] and sent(job__project=one) == 4
    # The first job is cancelled: its place goes to the project's other jobs now, not at their next chunk.
    with django_capture_on_commit_callbacks(execute=False):
        scoring_job_cancel(job=jobs[0])
    assert [sent(job=job) for job in jobs[1:]] == [2, 2] and sent(job__project=one) == 4
    # The second job is written to its end: the chunk that ends it sends the third job's next ones.
    for chunk_id in jobs[1].chunks.filter(finished_at__isnull=True).order_by("id").values_list("id", flat=True):
        with django_capture_on_commit_callbacks(execute=False):
            scoring_chunk_run(chunk_id=chunk_id)
    jobs[1].refresh_from_db()
    assert jobs[1].status == ScoringJob.Status.DONE and sent(job=jobs[2]) == 4 and sent(job__project=one) == 4
