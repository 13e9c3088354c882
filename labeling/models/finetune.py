"""Distillation (DIRAS section 3): a training set of pairs (or of prompts imported from a file) that a teacher
judges, and the fine-tuning job that teaches a small open model the teacher's answers with a LoRA adapter and
makes the result a judge."""
from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from labeling.models.jobs import Job


class TrainingSet(models.Model):
    """A named, stored selection of examples for distillation, split by query into train and held-out."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="training_sets")
    name = models.CharField(max_length=200)
    source = models.CharField(max_length=500, blank=True, help_text="the run it was sampled from, or the file")
    parameters = models.JSONField(default=dict, blank=True, help_text="how it was made (top, random, seed...)")
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="trainingset_unique_name"),
            models.CheckConstraint(condition=~Q(name=""), name="trainingset_name_not_empty"),
        ]

    def __str__(self) -> str:
        return f"training set {self.name!r} of {self.project}"


class TrainingExample(models.Model):
    """One example: a pair of the project (the teacher judges it), or a prompt imported from a DIRAS-layout file
    with the teacher's answer (`system`, `user`, `answer`). `group` is what the split keeps on one side: the
    query's external id, or the question of an imported prompt."""

    class Split(models.TextChoices):
        TRAIN = "train", "train"
        HELD_OUT = "held_out", "held-out"

    class Origin(models.TextChoices):
        TOP = "top", "top of the run"
        RANDOM = "random", "random"
        FILE = "file", "imported file"
        EXPERT = "expert", "an expert's label (a labelling round's retrain)"

    id = models.BigAutoField(primary_key=True)
    training_set = models.ForeignKey(TrainingSet, on_delete=models.CASCADE, related_name="examples")
    split = models.CharField(max_length=16, choices=Split.choices)
    origin = models.CharField(max_length=16, choices=Origin.choices)
    group = models.CharField(max_length=500)
    pair = models.ForeignKey("labeling.Pair", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    rank = models.PositiveIntegerField(null=True, blank=True, help_text="the pair's rank in the run (top)")
    system = models.TextField(blank=True)
    user = models.TextField(blank=True)
    answer = models.TextField(blank=True, help_text="an imported example's teacher answer")
    teacher_p = models.FloatField(null=True, blank=True, help_text="an imported example's teacher P(relevant)")

    class Meta:
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(fields=["training_set", "pair"], name="trainingexample_unique_pair"),
            models.CheckConstraint(condition=Q(split__in=["train", "held_out"]), name="trainingexample_split_valid"),
            models.CheckConstraint(
                condition=(Q(origin="file", pair__isnull=True) & ~Q(user="") & ~Q(answer=""))
                | (Q(origin__in=["top", "random", "expert"], pair__isnull=False)),
                name="trainingexample_pair_or_prompt",
            ),
        ]
        indexes = [models.Index(fields=["training_set", "split"], name="trainingexample_split")]


class FineTuneJob(Job):
    """Fine-tuning of a student from `base_model` on a training set's train split, with the teacher's answers, run
    by a worker: a LoRA adapter of a causal LM (`lora`, DIRAS's student) or a cross-encoder with a one-logit head
    (`crossencoder`, a CPU's student; `adapter` then holds the whole model folder). The adapter and the checkpoints live in Django's storage (`adapter`, `checkpoint`), so any worker on
    any machine resumes the job or loads the student. On success `student` is the judge it made."""

    project = models.ForeignKey("labeling.Project", on_delete=models.CASCADE, related_name="finetune_jobs")
    training_set = models.ForeignKey(TrainingSet, on_delete=models.PROTECT, related_name="finetune_jobs")
    teacher = models.ForeignKey(
        "labeling.Judge", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="whose judgments are the answers; empty when the set's examples carry them (a file)",
    )
    class StudentKind(models.TextChoices):
        LORA = "lora", "LoRA adapter of a causal LM"
        CROSSENCODER = "crossencoder", "cross-encoder"

    student_kind = models.CharField(max_length=16, choices=StudentKind.choices, default=StudentKind.LORA)
    base_model = models.CharField(max_length=300, help_text="the base model's folder")
    student_name = models.CharField(max_length=200, help_text="the judge it makes")
    hyperparameters = models.JSONField(default=dict, blank=True)
    examples = models.PositiveIntegerField(default=0, help_text="training examples")
    step = models.PositiveIntegerField(default=0)
    total_steps = models.PositiveIntegerField(default=0)
    loss_history = models.JSONField(default=list, blank=True, help_text="[[step, loss], ...]")
    examples_per_s = models.FloatField(null=True, blank=True)
    eta_s = models.FloatField(null=True, blank=True)
    checkpoint = models.CharField(max_length=500, blank=True, help_text="storage folder of the last checkpoint")
    checkpoint_step = models.PositiveIntegerField(default=0)
    resumed_from_step = models.PositiveIntegerField(null=True, blank=True)
    adapter = models.CharField(max_length=500, blank=True,
                               help_text="storage folder of the finished adapter (a cross-encoder's model folder)")
    student = models.ForeignKey(
        "labeling.Judge", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+",
        help_text="a cross-encoder student this one goes on from (its stored model is the start; a round's retrain)",
    )
    score_pool = models.BooleanField(default=False, help_text="when done, the student scores the whole pool")

    class Meta(Job.Meta):
        pass

    def __str__(self) -> str:
        return f"fine-tuning of {self.student_name!r} on {self.project} ({self.status})"

    @property
    def progress(self) -> float:
        if self.finished_at is not None:
            return 1.0
        return self.step / self.total_steps if self.total_steps else 0.0
