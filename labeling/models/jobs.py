"""The shape every kind of background work shares: a job row that someone (or a change of data) asks for, that
workers take, retry and finish, done or failed with the reason. Its kinds are declared in labeling/job_kinds.py;
docs/architecture.md ("Adding a kind of job") says how to add one."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

# What a job keeps of an error's text (a remote server's answer can be a whole HTML page).
MAX_ERROR_CHARS = 2000


class JobStatus(models.TextChoices):
    """Where a job stands (Job.Status). A job is finished, with `finished_at` set, when it is done, failed or
    cancelled; pending and running jobs are what workers still have to do."""

    PENDING = "pending", "pending"
    RUNNING = "running", "running"
    DONE = "done", "done"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class Job(models.Model):
    """Background work asked for and run by Celery workers. `attempts` counts the times a worker took the job (a
    retry and a redelivered message included), `started_at` is when the first of them did, `heartbeat_at` when its
    worker last showed it lives, `error` is the reason a failed job stopped (or, for work that goes on past
    failures, the last one)."""

    Status = JobStatus

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="who asked; empty when the command line or a change of data did",
    )
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0, help_text="times a worker took this job")
    # Written when a worker takes the job and then every JOB_HEARTBEAT_SECONDS while it runs (and by kinds that
    # report progress, at each report): the sweep (labeling/services/job_sweep.py) reads a stale one as a lost worker.
    # A fresh one means a live worker holds the job and no other takes it (labeling.services.jobs.job_free); a worker
    # that leaves a job running (an error, for the task to retry) clears it.
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="the worker's last sign of life")

    class Meta:
        abstract = True
        ordering = ["-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="%(class)s_status_valid"),
        ]

    @property
    def progress(self) -> float:
        """The share of the work done, from 0 to 1; kinds that count their work say more than finished or not."""
        return 1.0 if self.finished_at is not None else 0.0


class MeteredJob(Job):
    """A job whose work is calls to a judge's model: the tokens they used, priced when read (usd_cost with the
    judge's prices of the day), never stored as money. None: no answer came back."""

    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)

    class Meta(Job.Meta):
        abstract = True
