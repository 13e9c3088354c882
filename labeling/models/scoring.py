"""Scoring jobs: a judge's run over a project's pairs, and the chunks workers score it in."""
from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from labeling.models.jobs import Job
from labeling.models.judges import Judge


class ScoringJob(Job):
    """One run of a judge over a project's pairs, split into chunks of one query's pairs that workers score
    independently; progress is the sum of finished chunks. A chunk that fails marks its pairs failed and the
    job goes on: the job ends done (with the last chunk's error) or cancelled, never failed. Its attempts are
    its chunks' claims; its calls and tokens are its chunks' (job_usage)."""

    class Scope(models.TextChoices):
        ALL = "all", "all pairs"
        MISSING = "missing", "pairs not yet judged under the current definition"
        SELECTION = "selection", "selected pairs"

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="scoring_jobs")
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="scoring_jobs")
    scope = models.CharField(max_length=16, choices=Scope.choices)
    # Running from the start: its chunks are queued with it, and any worker may take any of them.
    status = models.CharField(max_length=16, choices=Job.Status.choices, default=Job.Status.RUNNING)
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    first_result_at = models.DateTimeField(
        null=True, blank=True, help_text="the first part written: speed counts from here, model loading excluded"
    )
    # The job's part of its project's share of the bulk workers, among the project's running jobs; the highest
    # among them also widens the project's share (labeling/services/scoring_dispatch.py). Only staff may raise it.
    priority = models.PositiveSmallIntegerField(default=1, db_default=1,
                                                help_text="share of the workers among running jobs (1 to 10)")

    class Meta(Job.Meta):
        constraints = [
            *Job.Meta.constraints,
            models.CheckConstraint(condition=Q(priority__gte=1, priority__lte=10), name="job_priority_range"),
            models.CheckConstraint(condition=Q(done__lte=F("total")), name="job_done_within_total"),
            models.CheckConstraint(condition=Q(failed__lte=F("done")), name="job_failed_within_done"),
        ]

    def __str__(self) -> str:
        return f"job {self.id}: {self.judge} on {self.project} ({self.status})"

    @property
    def progress(self) -> float:
        return self.done / self.total if self.total else 1.0

    # The names a scoring job had before it took the shape of every job, for the readers that still use them.
    @property
    def created_by(self):
        return self.requested_by

    @created_by.setter
    def created_by(self, user) -> None:
        self.requested_by = user

    @property
    def last_error(self) -> str:
        return self.error

    @last_error.setter
    def last_error(self, error: str) -> None:
        self.error = error


class ScoringChunk(models.Model):
    """Pairs of one query that one task scores and writes in one transaction; `finished_at` makes a re-run
    (a redelivered message, a resumed job) write nothing twice."""

    job = models.ForeignKey(ScoringJob, on_delete=models.CASCADE, related_name="chunks")
    query = models.ForeignKey("labeling.Query", on_delete=models.CASCADE, related_name="+")
    pair_ids = models.JSONField()
    size = models.PositiveIntegerField()
    attempts = models.PositiveIntegerField(default=0, help_text="times a worker claimed this chunk")
    # Claimed by one worker before it calls a model, so a second delivery of the message skips the chunk;
    # `claimed_at` moves with every part written: a claim that stops moving belongs to a lost worker.
    claimed_by = models.CharField(max_length=255, blank=True, default="", db_default="")
    claimed_at = models.DateTimeField(null=True, blank=True)
    lost_workers = models.PositiveIntegerField(default=0, db_default=0,
                                               help_text="claims taken back after their worker stopped moving")
    written = models.PositiveIntegerField(default=0, db_default=0,
                                          help_text="pairs of pair_ids written so far, in order")
    failed_pairs = models.PositiveIntegerField(default=0, db_default=0)
    # LLM calls this chunk made and their tokens, over all its attempts (cached ensemble members cost nothing).
    calls = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveBigIntegerField(default=0)
    completion_tokens = models.PositiveBigIntegerField(default=0)
    # Pairs sent to the model whose answer has not come back yet; when their worker is lost they become
    # `lost_calls`: paid for (at least one call each), never answered.
    in_flight = models.PositiveIntegerField(default=0, db_default=0)
    lost_calls = models.PositiveIntegerField(default=0, db_default=0)
    failed = models.BooleanField(default=False)
    error = models.TextField(blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Sent to the workers (a job keeps only a window of its chunks in the queue, so jobs share the workers).
    dispatched_at = models.DateTimeField(null=True, blank=True)
    # Seconds the model spent on this chunk's written parts (loading excluded), and where: the judge's measured
    # throughput per device, which estimates read.
    busy_seconds = models.FloatField(default=0.0, db_default=0.0)
    timed_pairs = models.PositiveIntegerField(default=0, db_default=0, help_text="pairs busy_seconds covers")
    device = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        ordering = ["job", "id"]
        indexes = [
            models.Index(fields=["job", "finished_at"], name="chunk_job_finished"),
            # The chunks waiting in the queue (sent, not written): how many are ahead of a job.
            models.Index(fields=["dispatched_at"], condition=Q(finished_at__isnull=True), name="chunk_open_dispatched"),
        ]
        constraints = [models.CheckConstraint(condition=Q(written__lte=F("size")), name="chunk_written_within_size")]

    def __str__(self) -> str:
        return f"chunk {self.id} of job {self.job_id} ({self.size} pairs)"
