"""The scoring kind of estimate (labeling.services.estimates): the Judges page's Estimate, made by a worker with
scoring_job_estimate, which may load the judge's model and time it on a few pairs."""
from __future__ import annotations

from dataclasses import asdict

from labeling.models import Estimate, Judge, Project, ScoringJob
from labeling.selectors.throughput import Throughput
from labeling.services.scoring import JobEstimate, ScoringError, scoring_job_estimate
from models_llm.cost import TokenEstimate


def scoring_estimate_check(*, project: Project, judge: Judge | None, scope: str) -> None:
    """Refuse what a scoring estimate cannot be asked for (ScoringError), before anything is queued."""
    if judge is None or judge.project_id != project.id:
        raise ScoringError("a scoring estimate needs a judge of this project")
    if scope not in (ScoringJob.Scope.ALL, ScoringJob.Scope.MISSING):
        raise ScoringError(f"an estimate's scope is 'all' or 'missing', got {scope!r}")


def scoring_estimate_make(row: Estimate) -> dict:
    """On the worker: the estimate of scoring the row's scope with its judge, as stored (ScoringError: none)."""
    estimate = scoring_job_estimate(project=row.project, judge=row.judge, scope=row.scope)
    return {"tokens": asdict(estimate.tokens), "cost_usd": estimate.cost_usd,
            "reference_cost_usd": estimate.reference_cost_usd, "observed_pairs": estimate.observed_pairs,
            "wall_s": estimate.wall_s, "sends_prompts": estimate.sends_prompts,
            "throughput": asdict(estimate.throughput) if estimate.throughput else None}


def scoring_estimate_read(row: Estimate) -> JobEstimate:
    """The estimate a done row holds."""
    data = row.result
    throughput = data["throughput"]
    return JobEstimate(judge=row.judge, scope=row.scope, tokens=TokenEstimate(**data["tokens"]),
                       cost_usd=data["cost_usd"], reference_cost_usd=data["reference_cost_usd"],
                       observed_pairs=data["observed_pairs"], wall_s=data["wall_s"],
                       sends_prompts=data["sends_prompts"], throughput=Throughput(**throughput) if throughput else None)
