"""LLM judges: their backends and methods, and the calibrators fitted to their P."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils import timezone


class JudgeBackend(models.TextChoices):
    """The kinds of judge (Judge.Backend). models_llm.types.Backend holds the four that load a model."""

    HF = "hf", "hf: local transformers model"
    OPENAI = "openai", "openai: OpenAI-compatible API"
    EMBEDDING = "embedding", "embedding: cosine similarity baseline"
    CROSSENCODER = "crossencoder", "crossencoder: a re-ranker reads query and passage together"
    ENSEMBLE = "ensemble", "ensemble: the mean P of other judges"
    IMPORT = "import", "import: the judgments of an imported bundle"

    @classmethod
    def creatable(cls) -> tuple[JudgeBackend, ...]:
        """The backends a judge is created with (an imported judge comes with its bundle's judgments)."""
        return (cls.HF, cls.OPENAI, cls.EMBEDDING, cls.CROSSENCODER, cls.ENSEMBLE)

    @classmethod
    def generative(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose model writes text: they draft definitions and their prompts cost tokens."""
        return (cls.HF, cls.OPENAI)

    @classmethod
    def local_model(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose `model` is a folder under a model root (openai names a model of its endpoint)."""
        return (cls.HF, cls.EMBEDDING, cls.CROSSENCODER)

    @classmethod
    def promptless(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose model reads query and passage and gives a score: no prompt, no text, no token
        bought; each has a method of its own name."""
        return (cls.EMBEDDING, cls.CROSSENCODER)

    @classmethod
    def scoring(cls) -> tuple[JudgeBackend, ...]:
        """The backends whose P is a score squeezed into [0, 1], not a probability: an embedding's rescaled cosine, a
        re-ranker's head through a sigmoid. It orders pairs but says nothing of how many are relevant until a
        calibrator maps it to P."""
        return (cls.EMBEDDING, cls.CROSSENCODER)


class JudgeMethod(models.TextChoices):
    """How a judge turns its model's answer into P (Judge.Method), recorded on each judgment; models_llm.types.Method
    is the same set."""

    TOK = "tok", "Tok: P from the Yes/No next-token logits"
    ASK = "ask", "Ask: parse the stated confidence"
    EMBEDDING = "embedding", "Embedding: cosine similarity of query and passage"
    CROSSENCODER = "crossencoder", "Cross-encoder: P from a re-ranker's head"
    ENSEMBLE = "ensemble", "Ensemble: DisastIR prompt strategies, JSON scores averaged"

    @classmethod
    def prompting(cls) -> tuple[JudgeMethod, ...]:
        """The methods a generative judge is created with."""
        return (cls.TOK, cls.ASK, cls.ENSEMBLE)

    @classmethod
    def default_for(cls, backend: str) -> JudgeMethod:
        """The method a new judge of `backend` scores with when none is chosen."""
        if backend in JudgeBackend.promptless():
            return cls(backend)  # the backend's own method, of the same name
        return cls.TOK


class Judge(models.Model):
    """An LLM judging configuration. Imported judgments get a judge with backend `import`."""

    Backend = JudgeBackend
    Method = JudgeMethod

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="judges", db_index=False)
    name = models.CharField(max_length=200)
    backend = models.CharField(max_length=64, choices=Backend.choices)
    model = models.CharField(max_length=300, blank=True)
    prompt = models.TextField(blank=True)
    calibration = models.CharField(max_length=64, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    price_in = models.FloatField(
        null=True, blank=True, help_text="USD per million prompt tokens (API judges), for cost figures"
    )
    price_out = models.FloatField(null=True, blank=True, help_text="USD per million completion tokens")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="judge_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="judge_name_not_empty"),
            models.CheckConstraint(
                condition=(Q(price_in__isnull=True) | Q(price_in__gte=0))
                & (Q(price_out__isnull=True) | Q(price_out__gte=0)),
                name="judge_prices_not_negative",
            ),
            models.CheckConstraint(condition=Q(backend__in=JudgeBackend.values), name="judge_backend_valid"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_imported(self) -> bool:
        return self.backend == self.Backend.IMPORT

    @property
    def is_ensemble(self) -> bool:
        """A judges ensemble: its P is the mean of its member judges' P; it has no model of its own."""
        return self.backend == self.Backend.ENSEMBLE

    @property
    def is_generative(self) -> bool:
        return self.backend in self.Backend.generative()


class JudgeCalibration(models.Model):
    """A calibrator fitted to a judge's P on the gold pairs; the newest one per judge is the one in use.
    `fitted_on` keeps the data (pair ids, raw P, binary gold) so a fit can be checked and repeated."""

    judge = models.ForeignKey(Judge, on_delete=models.CASCADE, related_name="calibrations")
    method = models.CharField(max_length=32)
    params = models.JSONField()
    cv = models.JSONField(help_text="out-of-fold ECE and Brier before and after, per method")
    n = models.PositiveIntegerField()
    n_relevant = models.PositiveIntegerField()
    fitted_on = models.JSONField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["judge", "-created_at", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(method__in=["isotonic", "platt"]), name="calibration_method_valid"),
            models.CheckConstraint(condition=Q(n_relevant__lte=F("n")), name="calibration_relevant_within_n"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} {self.method} ({self.created_at:%Y-%m-%d %H:%M})"
