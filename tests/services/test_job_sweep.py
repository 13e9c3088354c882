"""The one sweep of every kind of job (labeling.services.job_sweep): a running job past its kind's time limit is
given up with that reason; one whose heartbeat is older than its stall time is given up with that reason, or goes
on where its kind can (fine-tuning from its checkpoint, a bounded number of times); scratch folders of jobs that no
longer run are removed; the heartbeat thread keeps a live job from being taken for dead."""
from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.utils import timezone

from labeling.job_kinds import JOB_KINDS
from labeling.models import (
    AuditJob,
    BundleImportJob,
    DefinitionDraft,
    Estimate,
    FineTuneJob,
    Job,
    LabellingRound,
    QueryGenerationJob,
    ReplayJob,
    RetrievalJob,
    ScoringJob,
    SystemsResult,
    TrainingSet,
    ValidationResult,
)
from labeling.services import finetune
from labeling.services.job_sweep import jobs_sweep, scratch_sweep
from labeling.services.jobs import job_free, job_heartbeat, job_scratch, scratch_root
from tests.factories import JudgeFactory, ProjectFactory, QueryFactory

pytestmark = pytest.mark.django_db

KIND_NAMES = [kind.name for kind in JOB_KINDS]


@pytest.fixture(autouse=True)
def scratch(settings, tmp_path):
    settings.JOB_SCRATCH_DIR = tmp_path / "scratch"
    return settings.JOB_SCRATCH_DIR


def _job(kind: str, **fields) -> Job:
    """A job row of `kind`, running, with `fields` (started_at, heartbeat_at...)."""
    project = ProjectFactory()
    judge = JudgeFactory(project=project)
    fields = {"status": Job.Status.RUNNING, "started_at": timezone.now(), "heartbeat_at": timezone.now(), **fields}
    if kind == "scoring":
        return ScoringJob.objects.create(project=project, judge=judge, scope="all", **fields)
    if kind == "retrieval":
        return RetrievalJob.objects.create(project=project, retriever="bm25", name="r", **fields)
    if kind == "finetune":
        training_set = TrainingSet.objects.create(project=project, name="t")
        return FineTuneJob.objects.create(project=project, training_set=training_set, base_model="m",
                                          student_name="s", **fields)
    if kind == "audit":
        return AuditJob.objects.create(project=project, judge=judge, kind="perturbation", **fields)
    if kind == "bundle-import":
        job = BundleImportJob.objects.create(project=project, file_name="b.zip", stage="importing", **fields)
        job.upload = default_storage.save(f"bundles/{project.id}/{job.id}.zip", ContentFile(b"zip"))
        job.save(update_fields=["upload"])
        return job
    if kind == "validation":
        return ValidationResult.objects.create(project=project, **fields)
    if kind == "draft":
        return DefinitionDraft.objects.create(query=QueryFactory(project=project), judge=judge, **fields)
    if kind == "round":
        return LabellingRound.objects.create(project=project, number=1, judge=judge, budget=5,
                                             queue_mix={"uncertain": 80, "random": 20}, labels_at_start=0, **fields)
    if kind == "systems":
        return SystemsResult.objects.create(project=project, key=f"k{project.id}", **fields)
    if kind == "query-generation":
        return QueryGenerationJob.objects.create(project=project, judge=judge, query_set="llm", **fields)
    if kind == "estimate":
        return Estimate.objects.create(project=project, judge=judge, scope="all", **fields)
    if kind == "replay":
        return ReplayJob.objects.create(project=project, total=2, parameters={"judges": [judge.name]}, **fields)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_a_job_past_its_kinds_time_limit_is_given_up_with_the_reason(settings, kind):
    spec = next(k for k in JOB_KINDS if k.name == kind)
    setattr(settings, spec.limit_setting, 3600)
    now = timezone.now()
    old = _job(kind, started_at=now - timedelta(seconds=3601), heartbeat_at=now)
    young = _job(kind, started_at=now - timedelta(seconds=3000), heartbeat_at=now)
    result = jobs_sweep(now=now)
    old.refresh_from_db()
    young.refresh_from_db()
    assert result.given_up == {kind: [old.id]}
    assert old.status == ("cancelled" if kind == "scoring" else "failed") and old.finished_at is not None
    assert old.error == f"ran longer than its time limit of 3,600 s ({spec.limit_setting}); stopped"
    assert young.status == "running"


GOING_ON = ("scoring", "finetune", "round", "replay")  # the kinds that go on after a lost worker: tested below


@pytest.mark.parametrize("kind", [name for name in KIND_NAMES if name not in GOING_ON])
def test_a_job_whose_worker_stopped_beating_is_failed_with_the_reason(settings, kind):
    settings.JOB_STALL_SECONDS = 600
    # Within the kind's time limit (an estimate's is 10 min by default): only the stall rule is tried here.
    setattr(settings, next(spec for spec in JOB_KINDS if spec.name == kind).limit_setting, 3600)
    now = timezone.now()
    lost = _job(kind, heartbeat_at=now - timedelta(seconds=601))
    alive = _job(kind, heartbeat_at=now - timedelta(seconds=500))
    # Released by its worker for its task's retry (no heartbeat): the retry takes it; the time limit bounds it.
    released = _job(kind, heartbeat_at=None, started_at=now - timedelta(seconds=700))
    assert jobs_sweep(now=now).given_up == {kind: [lost.id]}
    for job in (lost, alive, released):
        job.refresh_from_db()
    assert lost.status == "failed" and alive.status == released.status == "running"
    assert lost.error == ("its worker stopped: no sign of life for 600 s (JOB_STALL_SECONDS); it was killed, ran out "
                          "of memory or lost its machine")


def test_a_swept_import_loses_its_upload_and_finishes(settings):
    settings.JOB_STALL_SECONDS = 60
    job = _job("bundle-import", heartbeat_at=timezone.now() - timedelta(minutes=5))
    stored = job.upload
    assert default_storage.exists(stored)
    jobs_sweep()
    job.refresh_from_db()
    assert (job.status, job.stage, job.upload) == ("failed", "finished", "")
    assert not default_storage.exists(stored)


def test_a_fine_tuning_job_whose_worker_stopped_resumes_then_fails_after_three_attempts(settings, monkeypatch,
                                                                                       django_capture_on_commit_callbacks):
    sent: list[int] = []
    monkeypatch.setattr(finetune.finetune_task, "delay", sent.append)
    settings.FINETUNE_STALL_SECONDS = 900
    stale = timezone.now() - timedelta(seconds=901)
    job = _job("finetune", heartbeat_at=stale, attempts=1)
    with django_capture_on_commit_callbacks(execute=True):
        result = jobs_sweep()
    job.refresh_from_db()
    assert result.resumed == {"finetune": [job.id]} and sent == [job.id] and job.status == "running"
    # The task it queued may take the job (finetune_run's take), and no other worker holds it meanwhile.
    assert FineTuneJob.objects.filter(job_free(timezone.now(), stall_seconds=900), id=job.id).exists()
    with django_capture_on_commit_callbacks(execute=True):
        assert not jobs_sweep().resumed  # queued once, however busy the workers are
    assert sent == [job.id]
    FineTuneJob.objects.filter(id=job.id).update(attempts=3, heartbeat_at=stale)
    with django_capture_on_commit_callbacks(execute=True):
        result = jobs_sweep()
    job.refresh_from_db()
    assert result.given_up == {"finetune": [job.id]} and sent == [job.id]
    assert job.status == "failed" and "FINETUNE_STALL_SECONDS" in job.error


@pytest.mark.parametrize(("kind", "task", "model"), [("round", "round_finish_task", LabellingRound),
                                                     ("replay", "replay_task", ReplayJob)])
def test_a_round_or_replay_whose_worker_stopped_is_queued_again_then_fails_after_three_attempts(
        settings, monkeypatch, kind, task, model):
    from labeling import tasks

    sent: list[int] = []
    monkeypatch.setattr(getattr(tasks, task), "delay", sent.append)
    settings.JOB_STALL_SECONDS = 600
    stale = timezone.now() - timedelta(seconds=601)
    job = _job(kind, heartbeat_at=stale, attempts=1)
    result = jobs_sweep()
    job.refresh_from_db()
    assert result.resumed == {kind: [job.id]} and sent == [job.id] and job.status == "running"
    # Released for the task it queued, which takes it (and counts the attempt); not queued again meanwhile.
    assert job.heartbeat_at is None and job.attempts == 1 and not jobs_sweep().resumed
    assert model.objects.filter(job_free(timezone.now()), id=job.id).exists()
    model.objects.filter(id=job.id).update(attempts=3, heartbeat_at=stale)
    result = jobs_sweep()
    job.refresh_from_db()
    assert result.given_up == {kind: [job.id]} and sent == [job.id]
    assert job.status == "failed" and "JOB_STALL_SECONDS" in job.error


def test_scratch_folders_of_jobs_that_no_longer_run_are_removed_and_live_ones_kept(settings):
    settings.JOB_STALL_SECONDS = 600
    now = timezone.now()
    live = _job("bundle-import")
    lost = _job("bundle-import", heartbeat_at=now - timedelta(seconds=601))
    done = _job("retrieval", status=Job.Status.DONE, finished_at=now)
    root = scratch_root()
    folders = {name: root / name for name in (f"bundle-import-{live.id}-a", f"bundle-import-{lost.id}-b",
                                              f"retrieval-{done.id}-c", "retrieval-999999-d", "not-a-job")}
    for folder in folders.values():
        (folder / "inside").mkdir(parents=True)
    removed = {folder.name for folder in scratch_sweep(now=now)}
    assert removed == {f"bundle-import-{lost.id}-b", f"retrieval-{done.id}-c", "retrieval-999999-d"}
    assert folders[f"bundle-import-{live.id}-a"].is_dir() and folders["not-a-job"].is_dir()


def test_a_job_scratch_folder_goes_however_the_block_ends():
    with pytest.raises(RuntimeError):
        with job_scratch("bundle-import", 7) as folder:
            (folder / "x").write_text("partial")
            raise RuntimeError("killed")
    assert folder.name.startswith("bundle-import-7-") and not folder.exists()


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_thread_beats_while_the_block_runs_and_stops_with_the_job(settings):
    """The beats come from a thread of their own, so a worker busy in one long call still shows it lives."""
    settings.JOB_HEARTBEAT_SECONDS = 0.05
    start = timezone.now() - timedelta(hours=1)
    job = _job("retrieval", heartbeat_at=start)
    rows = RetrievalJob.objects.filter(id=job.id)
    with job_heartbeat(rows):
        deadline = time.monotonic() + 10
        while rows.get().heartbeat_at == start and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rows.get().heartbeat_at > start
        rows.update(status=Job.Status.CANCELLED)  # the thread sees it no longer runs and ends
        beat = rows.get().heartbeat_at
        time.sleep(0.3)
        assert rows.get().heartbeat_at == beat
