"""Robustness audits of a judge before it is trusted at scale: the perturbation audit (length, keyword stuffing,
prompt injection, no definition, self-consistency) on a sample of the project's gold pairs, and the MultiConIR tests
on multi-condition items; and, not a robustness test but the same machinery, the beyond-the-pool estimate (a
judge's look at each run's entries below the pool, labeling/services/audit_beyond_pool.py). The probes a judge is
asked never enter the pool, the qrels or the queues: they live in the audit's own row, and so does the report."""
from __future__ import annotations

from django.db import models

from labeling.models.jobs import MeteredJob


class AuditKind(models.TextChoices):
    PERTURBATION = "perturbation", "perturbation audit"
    MULTICONDITION = "multicondition", "multi-condition tests (MultiConIR)"
    BEYOND_POOL = "beyond_pool", "beyond-the-pool estimate"


class AuditJob(MeteredJob):
    """One audit of `judge`: `parameters` say what was asked (sample, seed, tests...), `total` probes are scored by
    one worker, `done` of them so far; `calls` model calls were made. Done: `report` holds the figures (the shape is
    the kind's report function's, models_llm/audit)."""

    Kind = AuditKind

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="audits")
    judge = models.ForeignKey("labeling.Judge", on_delete=models.CASCADE, related_name="audits")
    kind = models.CharField(max_length=16, choices=AuditKind.choices)
    parameters = models.JSONField(default=dict, blank=True)
    total = models.PositiveIntegerField(default=0, help_text="probes to score")
    done = models.PositiveIntegerField(default=0, help_text="probes scored")
    calls = models.PositiveIntegerField(default=0, help_text="model calls made")
    report = models.JSONField(default=dict, blank=True)

    class Meta(MeteredJob.Meta):
        constraints = [
            *MeteredJob.Meta.constraints,
            models.CheckConstraint(condition=models.Q(kind__in=AuditKind.values), name="auditjob_kind_valid"),
        ]

    @property
    def progress(self) -> float:
        if self.finished_at is not None:
            return 1.0
        return self.done / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.kind} audit of {self.judge} ({self.status})"
