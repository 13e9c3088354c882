"""Estimates as short jobs, made by a worker: what a scoring, retrieval or fine-tuning job would take here. Each may
load a model and time it, which a web request must not wait for (SmolLM2's held two web threads for 18 minutes)."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import Job
from labeling.models.judges import Judge
from labeling.models.scoring import ScoringJob


class Estimate(Job):
    """What a job of `kind` with `arguments` would take (labeling.services.estimates): asked from the page that
    starts such jobs, made on the queue the job would run on (its probes time the workers' device) within
    ESTIMATE_TIME_LIMIT; `result` is the estimate once done, `error` why there is none. `judge` and `scope` are a
    scoring estimate's."""

    class Kind(models.TextChoices):
        SCORING = "scoring", "scoring"
        RETRIEVAL = "retrieval", "retrieval"
        FINETUNE = "finetune", "fine-tuning"

    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.SCORING)
    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="estimates")
    judge = models.ForeignKey(Judge, null=True, blank=True, on_delete=models.CASCADE, related_name="estimates")
    scope = models.CharField(max_length=16, choices=ScoringJob.Scope.choices, blank=True)
    arguments = models.JSONField(default=dict, blank=True,
                                 help_text="what the estimated job would be started with (the page's form)")
    result = models.JSONField(null=True, blank=True, help_text="the estimate (labeling.services.estimates)")

    def __str__(self) -> str:
        return f"{self.get_kind_display()} estimate {self.id} ({self.status})"
