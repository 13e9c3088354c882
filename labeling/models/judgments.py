"""A judge's judgments of pairs, and what each prompt strategy of an ensemble judge answered."""
from __future__ import annotations

from django.db import models
from django.db.models import F, Q, Value
from django.db.models.functions import Abs
from django.utils import timezone

from labeling.models.judges import Judge


class Judgment(models.Model):
    """One LLM judgment of a pair under one definition version. A parse failure is stored as such, never
    turned into a label: p_relevant is set exactly when the status is ok."""

    class Status(models.TextChoices):
        OK = "ok", "ok"
        PARSE_ERROR = "parse_error", "parse error"
        FAILED = "failed", "failed"

    pair = models.ForeignKey("labeling.Pair", on_delete=models.CASCADE, related_name="judgments", db_index=False)
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="judgments", db_index=False)
    definition = models.ForeignKey(
        "labeling.RelevanceDefinition", null=True, blank=True, on_delete=models.PROTECT, related_name="judgments"
    )
    p_relevant = models.FloatField(null=True, blank=True)
    guess = models.BooleanField(null=True, blank=True)
    confidence = models.FloatField(null=True, blank=True)
    raw_output = models.TextField(blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OK)
    error = models.TextField(blank=True)
    method = models.CharField(
        max_length=16, blank=True, default="", db_default="", help_text="tok, ask, embedding, or empty when imported"
    )
    yes_no_mass = models.FloatField(
        null=True, blank=True, help_text="Tok: P(Yes) + P(No) before normalising; below 0.5 the answer is suspect"
    )
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    score = models.FloatField(
        null=True, blank=True, help_text="ensemble: the mean of the members' scores on the intent's scale"
    )
    spread = models.FloatField(
        null=True, blank=True, help_text="ensemble: max - min of the members' P (0 when they agree)"
    )
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["pair", "judge", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "judge", "definition"],
                condition=Q(definition__isnull=False),
                name="judgment_unique_per_definition",
            ),
            models.UniqueConstraint(
                fields=["pair", "judge"], condition=Q(definition__isnull=True), name="judgment_unique_no_definition"
            ),
            models.CheckConstraint(
                condition=Q(p_relevant__isnull=True) | Q(p_relevant__gte=0, p_relevant__lte=1),
                name="judgment_p_in_unit_interval",
            ),
            models.CheckConstraint(
                condition=Q(confidence__isnull=True) | Q(confidence__gte=0, confidence__lte=1),
                name="judgment_confidence_in_unit_interval",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["ok", "parse_error", "failed"]), name="judgment_status_valid"
            ),
            models.CheckConstraint(
                condition=(Q(status="ok") & Q(p_relevant__isnull=False))
                | (~Q(status="ok") & Q(p_relevant__isnull=True)),
                name="judgment_p_iff_ok",
            ),
        ]
        indexes = [
            models.Index(fields=["judge", "pair"], name="judgment_judge_pair"),
            # The unique indexes on pair are partial: deleting a pair needs a plain one for its FK check.
            models.Index(fields=["pair"], name="judgment_pair"),
            # The uncertain queue walks a judge's P from 0.5 outwards; the stratified one by range of P.
            models.Index(
                F("judge"), Abs(F("p_relevant") - Value(0.5)), F("pair"),
                name="judgment_judge_uncertainty", condition=Q(status="ok"),
            ),
            models.Index(fields=["judge", "p_relevant"], name="judgment_judge_p", condition=Q(status="ok")),
        ]

    def __str__(self) -> str:
        return f"{self.judge_id}:{self.pair_id}={self.p_relevant}"


class MemberOutput(models.Model):
    """What one prompt strategy of an ensemble judge answered on one pair under one definition version: every
    model call (raw text, parsed value, tokens) and the strategy's final score or the parse error that stopped
    it. Stored as soon as the strategy has run, so a re-run (a killed worker, a resumed job) calls no LLM twice."""

    pair = models.ForeignKey("labeling.Pair", on_delete=models.CASCADE, related_name="+", db_index=False)
    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="member_outputs", db_index=False)
    definition = models.ForeignKey(
        "labeling.RelevanceDefinition", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    member = models.CharField(max_length=32, help_text="the prompt strategy: direct, cot or multi")
    intent = models.CharField(max_length=16)
    score = models.PositiveSmallIntegerField(null=True, blank=True)
    max_score = models.PositiveSmallIntegerField()
    error = models.TextField(blank=True)
    steps = models.JSONField(help_text="one entry per model call: step, raw, value, prompt_tokens, completion_tokens")
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    calls = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pair", "judge", "member"]
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "judge", "definition", "member"], condition=Q(definition__isnull=False),
                name="member_output_unique_per_definition",
            ),
            models.UniqueConstraint(
                fields=["pair", "judge", "member"], condition=Q(definition__isnull=True),
                name="member_output_unique_no_definition",
            ),
            models.CheckConstraint(
                condition=Q(score__isnull=True) | Q(score__lte=F("max_score")), name="member_output_score_in_scale"
            ),
        ]
        indexes = [
            models.Index(fields=["judge", "pair"], name="member_output_judge_pair"),
            models.Index(fields=["pair"], name="member_output_pair"),
        ]

    def __str__(self) -> str:
        return f"{self.judge_id}:{self.pair_id}:{self.member}={self.score}"
