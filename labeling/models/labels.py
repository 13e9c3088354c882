"""Human labels and the leases that hand items to experts."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Label(models.Model):
    """One human judgment. A change adds a row and marks the old one superseded, so history is kept and
    exactly one label per (pair, annotator) is current."""

    class Role(models.TextChoices):
        ANNOTATOR = "annotator", "annotator"
        ADJUDICATOR = "adjudicator", "adjudicator"

    pair = models.ForeignKey("labeling.Pair", on_delete=models.CASCADE, related_name="labels", db_index=False)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="labels")
    grade = models.SmallIntegerField()
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANNOTATOR)
    definition = models.ForeignKey(
        "labeling.RelevanceDefinition", null=True, blank=True, on_delete=models.PROTECT, related_name="labels"
    )
    note = models.TextField(blank=True)
    time_spent_seconds = models.FloatField(null=True, blank=True)
    unsure = models.BooleanField(default=False, db_default=False, help_text="the expert flagged the label as unsure")
    queue = models.CharField(
        max_length=16, blank=True, default="", db_default="",
        help_text="the queue that served the item; 'random' marks the unbiased validation sample",
    )
    client_key = models.CharField(
        max_length=64, blank=True, default="", db_default="", help_text="the client's idempotency key"
    )
    undone = models.BooleanField(default=False, db_default=False, help_text="withdrawn by its annotator (undo)")
    created_at = models.DateTimeField()
    superseded_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pair", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "annotator"], condition=Q(superseded_at__isnull=True), name="label_one_current"
            ),
            models.CheckConstraint(condition=Q(grade__gte=0), name="label_grade_nonnegative"),
            models.CheckConstraint(condition=Q(role__in=["annotator", "adjudicator"]), name="label_role_valid"),
            models.CheckConstraint(
                condition=Q(time_spent_seconds__isnull=True) | Q(time_spent_seconds__gte=0),
                name="label_time_spent_nonnegative",
            ),
            models.UniqueConstraint(
                fields=["annotator", "client_key"], condition=~Q(client_key=""), name="label_unique_client_key"
            ),
            models.CheckConstraint(condition=Q(undone=False) | Q(superseded_at__isnull=False), name="label_undone_superseded"),
        ]
        indexes = [
            models.Index(fields=["pair", "annotator", "id"], name="label_pair_history"),
            models.Index(fields=["annotator", "created_at"], name="label_annotator_recent"),
        ]

    def __str__(self) -> str:
        return f"{self.annotator} -> {self.grade}"


class Lease(models.Model):
    """An item handed to one expert: while `expires_at` is ahead, the item counts as taken by them. A skipped
    item keeps its row (`skipped`), so the expert is not given it again. Submitting a label deletes the lease."""

    pair = models.ForeignKey("labeling.Pair", on_delete=models.CASCADE, related_name="leases", db_index=False)
    annotator = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="leases")
    queue = models.CharField(max_length=16)
    claimed_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    skipped = models.BooleanField(default=False)

    class Meta:
        ordering = ["claimed_at", "id"]
        constraints = [models.UniqueConstraint(fields=["pair", "annotator"], name="lease_unique_pair_annotator")]
        indexes = [models.Index(fields=["pair", "expires_at"], name="lease_pair_expiry")]

    def __str__(self) -> str:
        return f"{self.annotator} holds {self.pair_id} until {self.expires_at:%H:%M:%S}"
