"""Labelling rounds (#33): the loop of humans and judge, one batch of expert labels at a time."""
from __future__ import annotations

from django.db import models
from django.db.models import Q

from labeling.models.jobs import Job, JobStatus


class LabellingRound(Job):
    """One round of the loop: the queue judge and mix it set, the labels it waits for (`budget`, counted from
    `labels_at_start`), and, once they are given, what a worker did with them (`after`: refit the judge's
    calibrator, or retrain its cross-encoder student from its last state with the experts' labels, `finetune`)
    and the numbers it measured (`numbers`: labels spent, and before and after the refit or retrain the
    completeness estimates, the stopping state and the judge's accuracy on the random validation sample; the
    reason when no refit could be made). Pending: experts are labelling its batch; running: the worker measures
    and refits, or (`waiting_since`) the retrained student trains and scores the pool; done: measured (with or
    without a refit); failed: the worker or the retrain failed, with the reason."""

    class After(models.TextChoices):
        CALIBRATE = "calibrate", "refit the judge's calibrator"
        STUDENT = "student", "retrain the cross-encoder student with the experts' labels, then score the pool"

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="rounds")
    number = models.PositiveIntegerField(help_text="1 for the project's first round, then 2, 3...")
    judge = models.ForeignKey("labeling.Judge", on_delete=models.CASCADE, related_name="rounds",
                              help_text="the judge whose P orders the uncertain queue and that the round refits")
    budget = models.PositiveIntegerField(help_text="expert labels the round waits for")
    queue_mix = models.JSONField(help_text="the queue mix the round set, strategy -> share (random included)")
    after = models.CharField(max_length=16, choices=After.choices, default=After.CALIBRATE)
    labels_at_start = models.PositiveIntegerField(help_text="the project's current labels when the round started")
    numbers = models.JSONField(null=True, blank=True, help_text="what the round measured when its batch was in")
    graded = models.BooleanField(default=False, help_text="its queues may serve pairs that have a gold grade already")
    waiting_since = models.DateTimeField(
        null=True, blank=True, help_text="running but held by no worker: since when it waits for its retrained "
                                         "student to be trained and to score the pool, before measuring again")
    finetune = models.ForeignKey("labeling.FineTuneJob", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="+", help_text="after 'student': the retrain the round started")

    class Meta(Job.Meta):
        constraints = [  # noqa: RUF012 - Django reads Meta lists
            models.CheckConstraint(condition=Q(status__in=JobStatus.values), name="labellinground_status_valid"),
            models.UniqueConstraint(fields=["project", "number"], name="labellinground_number_unique"),
            models.CheckConstraint(condition=Q(budget__gte=1), name="labellinground_budget_positive"),
        ]

    def __str__(self) -> str:
        return f"round {self.number} of {self.project_id}"
