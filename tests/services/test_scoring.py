"""Scoring jobs run chunk by chunk in this process with real models: one judgment per pair, re-runs write
nothing, failures are recorded on the pairs and the job goes on, cancelling stops it."""
from pathlib import Path

import pytest
from django.conf import settings

from labeling.models import Judgment, ScoringChunk, ScoringJob
from labeling.services.judges import JudgeError, judge_create
from labeling.services.scoring import (
    ScoringError,
    scoring_chunk_run,
    scoring_job_cancel,
    scoring_job_create,
    scoring_job_resume,
)
from labeling.tasks import score_chunk_task
from tests.scoring_fixtures import minilm_judge, small_scoring_project, smollm2_judge

pytestmark = pytest.mark.django_db


def run_all(job: ScoringJob) -> int:
    return sum(scoring_chunk_run(chunk_id=c) for c in job.chunks.values_list("id", flat=True))


def test_smollm2_tok_job_judges_every_pair_once(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=6)
    judge = smollm2_judge(project)
    job = scoring_job_create(project=project, judge=judge, chunk_pairs=4)
    assert job.total == 12 and job.chunks.count() == 4  # chunks never mix queries: 6 pairs -> 4 + 2
    assert run_all(job) == 12
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (ScoringJob.Status.DONE, 12, 0)
    judgments = Judgment.objects.filter(judge=judge)
    assert judgments.count() == 12 and judgments.values("pair").distinct().count() == 12
    for judgment in judgments:
        assert judgment.method == "tok" and judgment.status == "ok" and 0.0 <= judgment.p_relevant <= 1.0
        assert 0.0 < judgment.yes_no_mass <= 1.0 and judgment.definition is not None
    assert run_all(job) == 0  # finished chunks are never written twice
    again = scoring_job_create(project=project, judge=judge)
    assert again.total == 0 and again.status == ScoringJob.Status.DONE


def test_scope_all_rescore_updates_in_place(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=5)
    judge = minilm_judge(project)
    run_all(scoring_job_create(project=project, judge=judge))
    before = dict(Judgment.objects.filter(judge=judge).values_list("pair_id", "p_relevant"))
    job = scoring_job_create(project=project, judge=judge, scope="all")
    assert job.total == 5
    run_all(job)
    after = dict(Judgment.objects.filter(judge=judge).values_list("pair_id", "p_relevant"))
    assert after.keys() == before.keys() and after == pytest.approx(before)
    assert Judgment.objects.filter(judge=judge).count() == 5


def test_a_chunk_that_keeps_failing_marks_its_pairs_and_the_job_goes_on(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=3)
    broken = judge_create(project=project, name="down", backend="openai", model="gpt-x",
                          endpoint="unreachable", max_retries=0, timeout_s=2.0, method="ask")
    job = scoring_job_create(project=project, judge=broken, chunk_pairs=3)
    for chunk_id in job.chunks.values_list("id", flat=True):
        score_chunk_task.apply(args=[chunk_id])  # retries run eagerly, then the chunk is given up
    job.refresh_from_db()
    assert (job.status, job.done, job.failed) == (ScoringJob.Status.DONE, 6, 6)
    failed = Judgment.objects.filter(judge=broken)
    assert failed.count() == 6 and set(failed.values_list("status", flat=True)) == {"failed"}
    assert all(j.p_relevant is None and j.guess is None and "127.0.0.1:9" in j.error for j in failed)
    assert all(chunk.failed and chunk.attempts == 4 for chunk in ScoringChunk.objects.filter(job=job))


def test_a_failure_never_replaces_a_stored_answer(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=3)
    judge = minilm_judge(project)
    run_all(scoring_job_create(project=project, judge=judge))
    stored = dict(Judgment.objects.filter(judge=judge).values_list("pair_id", "p_relevant"))
    judge.model = str(Path(settings.MODEL_ROOTS[0]) / f"gone-{tmp_path.name}")  # the folder disappears: every chunk fails
    judge.save()
    job = scoring_job_create(project=project, judge=judge, scope="all")
    for chunk_id in job.chunks.values_list("id", flat=True):
        score_chunk_task.apply(args=[chunk_id])
    job.refresh_from_db()
    assert job.failed == 3 and "gone" in job.last_error
    assert dict(Judgment.objects.filter(judge=judge).values_list("pair_id", "p_relevant")) == stored


def test_cancel_stops_the_job_and_resume_requeues_only_unwritten_chunks(tmp_path, django_capture_on_commit_callbacks):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=4)
    judge = minilm_judge(project)
    job = scoring_job_create(project=project, judge=judge, chunk_pairs=2)
    first = job.chunks.order_by("id").first()
    scoring_chunk_run(chunk_id=first.id)
    assert scoring_job_resume(job=job) == 3
    scoring_job_cancel(job=job)
    assert [scoring_chunk_run(chunk_id=c) for c in job.chunks.values_list("id", flat=True)] == [0, 0, 0, 0]
    job.refresh_from_db()
    assert job.status == ScoringJob.Status.CANCELLED and job.done == 2
    assert scoring_job_resume(job=job) == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"backend": "hf", "model": "/nowhere/model", "method": "tok"}, "'/nowhere/model' is not under a model root"),
        ({"backend": "hf", "model": "/etc", "method": "tok"}, "'/etc' is not under a model root"),
        ({"backend": "hf", "model": "{root}/../../etc", "method": "tok"}, "is not under a model root"),
        ({"backend": "hf", "model": "{root}/missing", "method": "tok"}, "missing does not exist"),
        ({"backend": "hf", "model": "{root}", "method": "tok"}, "holds no config.json"),
        ({"backend": "openai", "model": "gpt-4o", "method": "ask"}, "needs an endpoint"),
        ({"backend": "hf", "model": "{root}/x", "method": "shout"}, "method must be tok, ask, embedding, ensemble or crossencoder"),
    ],
)
def test_bad_judges_are_refused_with_the_reason(tmp_path, kwargs, message):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=2)
    kwargs = {**kwargs, "model": kwargs["model"].format(root=settings.MODEL_ROOTS[0])}
    with pytest.raises(JudgeError, match=message):
        judge_create(project=project, name="bad", **kwargs)


def test_selection_with_foreign_pair_ids_is_refused(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=1, passages=2)
    judge = minilm_judge(project)
    with pytest.raises(ScoringError, match=r"pairs \[999999\] are not in project"):
        scoring_job_create(project=project, judge=judge, scope="selection", pair_ids=[999999])


def test_a_job_counts_its_chunks_claims_as_attempts_and_starts_with_the_first(tmp_path):
    project = small_scoring_project(tmp_path / "b", queries=2, passages=2)
    job = scoring_job_create(project=project, judge=minilm_judge(project), chunk_pairs=2)
    assert (job.status, job.attempts, job.started_at, job.progress) == ("running", 0, None, 0.0)
    run_all(job)
    job.refresh_from_db()
    assert (job.status, job.attempts, job.progress) == ("done", 2, 1.0)
    assert job.started_at <= job.first_result_at <= job.finished_at
