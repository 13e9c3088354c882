"""The fine-tuning kind of estimate (labeling.services.estimates): the fine-tuning page's Estimate, made by a worker
on the fine-tuning queue with finetune_estimate, which may load the base model and time a few training steps."""
from __future__ import annotations

from dataclasses import asdict

from labeling.models import Estimate
from labeling.selectors.finetune_training_sets import training_set_by_name
from labeling.selectors.lookups import judge_by_name
from labeling.selectors.throughput import Throughput
from labeling.services.finetune import FinetuneEstimate, finetune_estimate


def finetune_estimate_make(row: Estimate) -> dict:
    """On the worker: finetune_estimate with the row's arguments (the page's form: the training set and teacher by
    name, then finetune_create's settings), as stored."""
    arguments = dict(row.arguments)
    teacher = arguments.pop("teacher")
    estimate = finetune_estimate(
        project=row.project, training_set=training_set_by_name(row.project, arguments.pop("training_set")),
        teacher=judge_by_name(project=row.project, name=teacher) if teacher else None, **arguments)
    return asdict(estimate)


def finetune_estimate_read(row: Estimate) -> FinetuneEstimate:
    """The estimate a done row holds."""
    return FinetuneEstimate(**{**row.result, "throughput": Throughput(**row.result["throughput"])})
