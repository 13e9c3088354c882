"""A scoring job's dry-run estimate, made by a worker: it may load the judge's model and time it on a few pairs,
which a web request must not wait for (SmolLM2's held two web threads for 18 minutes)."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import Job
from labeling.models.judging import Judge, ScoringJob


class ScoringEstimate(Job):
    """What scoring `scope` with a judge would take (labeling.services.scoring_estimate): asked from the Judges page,
    made on the queue the judge's chunks go to (the probe times the workers' device), within ESTIMATE_TIME_LIMIT;
    `result` is the estimate once done, `error` why there is none."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="scoring_estimates")
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="scoring_estimates")
    scope = models.CharField(max_length=16, choices=ScoringJob.Scope.choices)
    result = models.JSONField(null=True, blank=True, help_text="the estimate (labeling.services.scoring_estimate)")

    def __str__(self) -> str:
        return f"estimate {self.id}: {self.judge} ({self.scope}, {self.status})"
