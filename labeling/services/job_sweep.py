"""The sweep of every kind of background work, one rule for all (Celery beat runs it every JOB_SWEEP_SECONDS): a
running job whose worker stopped showing it lives for its kind's stall time, or that has run longer than its kind's
hard time limit, is given up with the reason, by the kind's own fail service (which cleans up what the kind leaves:
an import's upload, a fine-tuning's checkpoints). Kinds that can go on from where they were do so instead of
failing when their worker was lost: scoring's chunks are queued again (labeling.services.scoring_chunks) and a
fine-tuning job from its last checkpoint, each a bounded number of times. When a worker starts, it removes the
scratch folders that jobs left on its machine (a killed worker cleans nothing up)."""
from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from labeling.models import (
    AuditJob,
    BundleImportJob,
    DefinitionDraft,
    Estimate,
    FineTuneJob,
    Job,
    LabellingRound,
    QueryGenerationJob,
    RetrievalJob,
    ScoringJob,
    SystemsResult,
    ValidationResult,
)
from labeling.services.audit import audit_fail
from labeling.services.bundle_upload import bundle_import_fail
from labeling.services.drafting import definition_draft_fail
from labeling.services.estimates import estimate_fail
from labeling.services.finetune import FinetuneJobError, finetune_fail, finetune_resume
from labeling.services.jobs import scratch_root
from labeling.services.query_generation import query_generation_fail
from labeling.services.retrieval import retrieval_fail
from labeling.services.rounds import round_fail, round_resume
from labeling.services.scoring import scoring_job_cancel
from labeling.services.scoring_chunks import scoring_sweep
from labeling.services.systems_cache import systems_refresh_fail
from labeling.services.validation import validation_refresh_fail

logger = logging.getLogger(__name__)

# A fine-tuning job whose worker was lost is resumed from its checkpoint until it has been taken this many times.
FINETUNE_MAX_ATTEMPTS = 3


def _scoring_give_up(job: Job, reason: str) -> None:
    scoring_job_cancel(job=job)
    ScoringJob.objects.filter(id=job.id).update(error=reason)


def _finetune_resume(job: Job) -> bool:
    if job.attempts >= FINETUNE_MAX_ATTEMPTS:
        return False
    try:
        finetune_resume(job=job)
    except FinetuneJobError:
        return False
    # Released, as a worker leaving it would (no heartbeat): the task just queued may take it (a fresh heartbeat here
    # made the job look held, and the worker left it alone), and the sweep does not queue it again while the GPU
    # queue is busy (the time limit bounds it).
    FineTuneJob.objects.filter(id=job.id).update(heartbeat_at=None)
    return True


@dataclass(frozen=True)
class JobKind:
    """A kind of background work as the sweep sees it: its job rows, the settings that bound it, and what giving up
    (and, for kinds that can, going on) means for it."""

    name: str  # the prefix of its scratch folders too
    model: type[Job]
    limit_setting: str  # the hard time limit of a job, in seconds from its start
    give_up: Callable[[Job, str], object]
    stall_setting: str | None = "JOB_STALL_SECONDS"  # None: the kind sweeps its own stalls (scoring's chunks)
    resume: Callable[[Job], bool] | None = field(default=None)  # a lost worker's job goes on; False: give up
    # Running rows that wait on other work, not on a worker (a round waiting for its retrain): neither stalled nor
    # past the limit; the work they wait on has its own, and its end wakes them.
    waits: Q | None = None

    @property
    def time_limit(self) -> int:
        return getattr(settings, self.limit_setting)

    @property
    def stall_seconds(self) -> int | None:
        return None if self.stall_setting is None else getattr(settings, self.stall_setting)


JOB_KINDS = (
    JobKind("scoring", ScoringJob, "SCORING_TIME_LIMIT", _scoring_give_up, stall_setting=None),
    JobKind("retrieval", RetrievalJob, "RETRIEVAL_TIME_LIMIT",
            lambda job, reason: retrieval_fail(job_id=job.id, error=reason)),
    JobKind("finetune", FineTuneJob, "FINETUNE_TIME_LIMIT", lambda job, reason: finetune_fail(job_id=job.id,
                                                                                            error=reason),
            stall_setting="FINETUNE_STALL_SECONDS", resume=_finetune_resume),
    JobKind("audit", AuditJob, "AUDIT_TIME_LIMIT", lambda job, reason: audit_fail(job_id=job.id, error=reason)),
    JobKind("bundle-import", BundleImportJob, "BUNDLE_IMPORT_TIME_LIMIT",
            lambda job, reason: bundle_import_fail(job_id=job.id, error=reason)),
    JobKind("validation", ValidationResult, "VALIDATION_TIME_LIMIT",
            lambda job, reason: validation_refresh_fail(project_id=job.project_id, error=reason)),
    JobKind("draft", DefinitionDraft, "DRAFT_TIME_LIMIT",
            lambda job, reason: definition_draft_fail(draft_id=job.id, error=reason)),
    JobKind("round", LabellingRound, "ROUND_TIME_LIMIT", lambda job, reason: round_fail(round_id=job.id, error=reason),
            resume=lambda job: round_resume(job=job), waits=Q(waiting_since__isnull=False)),
    JobKind("systems", SystemsResult, "SYSTEMS_TIME_LIMIT",
            lambda job, reason: systems_refresh_fail(result_id=job.id, error=reason)),
    JobKind("query-generation", QueryGenerationJob, "QUERY_GENERATION_TIME_LIMIT",
            lambda job, reason: query_generation_fail(job_id=job.id, error=reason)),
    JobKind("estimate", Estimate, "ESTIMATE_TIME_LIMIT",
            lambda job, reason: estimate_fail(estimate_id=job.id, error=reason)),
)
_BY_NAME = {kind.name: kind for kind in JOB_KINDS}


def stalled(kind: JobKind, now: datetime) -> Q:
    """Running jobs of `kind` whose worker has shown no sign of life for its stall time. A running job without a
    heartbeat was released by its worker for its task's retry (labeling.services.jobs.job_heartbeat), which comes
    within minutes: not a lost worker; the kind's time limit bounds it if the retry never comes."""
    stale = now - timedelta(seconds=kind.stall_seconds or 0)
    return Q(status=Job.Status.RUNNING, heartbeat_at__lt=stale)


@dataclass
class SweepResult:
    given_up: dict[str, list[int]] = field(default_factory=dict)  # kind -> job ids failed or cancelled
    resumed: dict[str, list[int]] = field(default_factory=dict)  # kind -> job ids that go on after a lost worker
    chunks_requeued: list[int] = field(default_factory=list)
    chunks_failed: list[int] = field(default_factory=list)


def jobs_sweep(*, now: datetime | None = None) -> SweepResult:
    """Apply the rule to every kind: a running job past its time limit is given up ("ran longer than ..."); one
    whose heartbeat is older than its stall time goes on where its kind can (resume), else is given up ("its
    worker stopped ..."). Scoring's chunks are swept by scoring_sweep (a lost chunk is queued again), and the
    scratch folders of jobs that no longer run by scratch_sweep."""
    now = now or timezone.now()
    result = SweepResult()
    for kind in JOB_KINDS:
        running = kind.model.objects.filter(status=Job.Status.RUNNING)
        if kind.waits is not None:
            running = running.exclude(kind.waits)
        limit = kind.time_limit
        for job in running.filter(started_at__lt=now - timedelta(seconds=limit)).order_by("id"):
            kind.give_up(job, f"ran longer than its time limit of {limit:,} s ({kind.limit_setting}); stopped")
            result.given_up.setdefault(kind.name, []).append(job.id)
        if kind.stall_setting is None:
            continue
        for job in running.filter(stalled(kind, now)).order_by("id"):
            if kind.resume is not None and kind.resume(job):
                result.resumed.setdefault(kind.name, []).append(job.id)
                continue
            kind.give_up(job, f"its worker stopped: no sign of life for {kind.stall_seconds:,} s "
                              f"({kind.stall_setting}); it was killed, ran out of memory or lost its machine")
            result.given_up.setdefault(kind.name, []).append(job.id)
    chunks = scoring_sweep()
    result.chunks_requeued, result.chunks_failed = chunks.requeued, chunks.failed
    # What the jobs given up left on this machine; other machines' folders go when a worker starts there.
    scratch_sweep(now=now)
    if result.given_up or result.resumed:
        logger.info("job sweep: given up %s, resumed %s", result.given_up, result.resumed)
    return result


_SCRATCH_NAME = re.compile(r"(?P<kind>[a-z-]+?)-(?P<id>\d+)(-.*)?")


def scratch_sweep(*, now: datetime | None = None) -> list[Path]:
    """Remove the scratch folders (labeling.services.jobs.job_scratch) of jobs that no longer run on this machine:
    finished, gone, or running without a sign of life (their worker was killed). A folder of a job that still
    beats belongs to another worker of this machine and stays. Returns the folders removed."""
    now = now or timezone.now()
    root = scratch_root()
    removed = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        match = _SCRATCH_NAME.fullmatch(folder.name)
        kind = _BY_NAME.get(match["kind"]) if match else None
        if kind is None:
            continue
        alive = kind.model.objects.filter(id=int(match["id"]), status__in=[Job.Status.PENDING, Job.Status.RUNNING])
        if kind.stall_setting is not None:
            alive = alive.exclude(stalled(kind, now))
        if not alive.exists():
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        logger.info("removed %d scratch folder(s) of jobs that no longer run: %s", len(removed),
                    ", ".join(folder.name for folder in removed))
    return removed
