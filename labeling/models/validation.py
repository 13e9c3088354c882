"""The validation report of a project, cached."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import Job


class ValidationResult(Job):
    """The validation report of a project, cached: recomputed by a worker after labels or judgments change
    (`requested_at` later than `computed_at` means a newer one is on its way). One row per project, asked for
    again and again: each request that finds no recomputation pending makes the job pending once more, with
    its attempts counted afresh."""

    project = models.OneToOneField("labeling.Project", on_delete=models.CASCADE, related_name="validation_result")
    data = models.JSONField(null=True, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True, help_text="when the stored report's run started")
    requested_at = models.DateTimeField(null=True, blank=True, help_text="the latest request")

    def __str__(self) -> str:
        return f"validation of {self.project}"

    @property
    def is_stale(self) -> bool:
        return self.computed_at is None or (self.requested_at is not None and self.requested_at > self.computed_at)
