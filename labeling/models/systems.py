"""The Systems page's evaluation of a project's runs against its qrels sources, cached as a job's result."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import Job


class SystemsResult(Job):
    """The Systems page's evaluation of a project's runs under one choice of sources and options, cached: computed
    by a worker (or within the request when the runs are small), read by the page. One row per project and choice
    (`key`: a hash of `options`). `inputs` is what the runs, labels, judgments and releases were when it was
    computed: a page that finds them changed shows the stored result as stale and asks for a new one, debounced.
    The result itself (the report, the significance tests, leave one run out) is a file of the storage, signed
    (`digest`, an HMAC under the secret key) so that only what a worker of this site wrote is ever read back."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="systems_results")
    key = models.CharField(max_length=64)
    options = models.JSONField(default=dict)
    inputs = models.JSONField(null=True, blank=True)
    file = models.CharField(max_length=500, blank=True, help_text="storage name of the stored result")
    digest = models.CharField(max_length=128, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True, help_text="when the stored result's run started")
    requested_at = models.DateTimeField(null=True, blank=True, help_text="the latest request")
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)

    class Meta(Job.Meta):
        constraints = [
            *Job.Meta.constraints,
            models.UniqueConstraint(fields=["project", "key"], name="systemsresult_unique_key"),
        ]

    def __str__(self) -> str:
        return f"systems report of {self.project} ({self.status})"

    @property
    def progress(self) -> float:
        if self.finished_at is not None:
            return 1.0
        return min(1.0, self.done / self.total) if self.total else 0.0
