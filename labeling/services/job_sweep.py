"""The sweep of every kind of background work (labeling/job_kinds.py), one rule for all (Celery beat runs it every
JOB_SWEEP_SECONDS): a running job whose worker stopped showing it lives for its kind's stall time, or that has run
longer than its kind's hard time limit, is given up with the reason, by the kind's own fail service (which cleans up
what the kind leaves: an import's upload, a fine-tuning's checkpoints). Kinds that can go on from where they were do
so instead of failing when their worker was lost: scoring's chunks are queued again (labeling.services.scoring_chunks),
a fine-tuning job from its last checkpoint and a round, each a bounded number of times. When a worker starts, it
removes the scratch folders that jobs left on its machine (a killed worker cleans nothing up)."""
from __future__ import annotations

import logging
import re
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from django.db.models import Q
from django.utils import timezone

from labeling.job_kinds import JOB_KINDS, JobKind
from labeling.models import Job
from labeling.services.jobs import scratch_root
from labeling.services.scoring_chunks import scoring_sweep

logger = logging.getLogger(__name__)

_BY_NAME = {kind.name: kind for kind in JOB_KINDS}


def _give_up(kind: JobKind, job: Job, reason: str) -> None:
    if kind.give_up is not None:
        kind.service("give_up")(job=job, error=reason)
    else:
        kind.service("fail")(**{kind.key: getattr(job, kind.key_field)}, error=reason)


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
            _give_up(kind, job, f"ran longer than its time limit of {limit:,} s ({kind.limit_setting}); stopped")
            result.given_up.setdefault(kind.name, []).append(job.id)
        if kind.stall_setting is None:
            continue
        for job in running.filter(stalled(kind, now)).order_by("id"):
            if kind.resume is not None and kind.service("resume")(job=job):
                result.resumed.setdefault(kind.name, []).append(job.id)
                continue
            _give_up(kind, job, f"its worker stopped: no sign of life for {kind.stall_seconds:,} s "
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
