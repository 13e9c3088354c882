"""Frozen qrels releases (#34): the qrels of one source as they were when an admin froze them under a name, stored
once in Django's storage (the JSONL export's bytes, with every pair's grade, P and provenance) and never changed,
so a published number can always be recomputed on exactly the qrels it was computed on."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


class QrelsRelease(models.Model):
    """One release. `storage` names the JSONL file in Django's storage and `sha256` its content; `source`,
    `threshold` and `rule` (the judge's relevance rule, in words) say which grades were frozen, `judge_name` and `calibrator` the judge and the calibrator in use
    then, `definitions` each query's current definition version; `pairs` (records), `graded` (pairs with a grade),
    `relevant` (graded at or above the scale's relevant_from) and `queries` (queries with a grade) count them."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="releases")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    source = models.CharField(max_length=250, help_text="human, judge:NAME or combined:NAME")
    threshold = models.FloatField(null=True, blank=True, help_text="the judge's P threshold (judge sources)")
    rule = models.CharField(max_length=200, blank=True,
                            help_text="when the judge's P made a pair relevant (judge sources), in words")
    judge_name = models.CharField(max_length=200, blank=True)
    calibrator = models.JSONField(null=True, blank=True, help_text="the judge's calibrator in use when frozen")
    definitions = models.JSONField(default=dict, help_text="query external id -> its current definition version")
    relevant_from = models.IntegerField(help_text="the scale's first relevant grade when frozen")
    storage = models.CharField(max_length=500, help_text="the JSONL file in Django's storage")
    sha256 = models.CharField(max_length=64)
    pairs = models.PositiveIntegerField(default=0)
    graded = models.PositiveIntegerField(default=0)
    relevant = models.PositiveIntegerField(default=0)
    queries = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    class Meta:
        ordering = ["project", "-created_at", "-id"]  # noqa: RUF012 - Django reads Meta lists
        constraints = [  # noqa: RUF012 - Django reads Meta lists
            models.UniqueConstraint(fields=["project", "name"], name="qrelsrelease_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="qrelsrelease_name_not_empty"),
        ]

    def __str__(self) -> str:
        return f"qrels release {self.name!r} of {self.project}"
