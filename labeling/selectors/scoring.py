"""Reads about scoring: a job's progress (done, failed, speed, time left) and the jobs a page lists."""
from __future__ import annotations

from dataclasses import dataclass

from django.db.models import QuerySet, Sum
from django.utils import timezone

from labeling.models import Judge, MemberOutput, Project, ScoringJob
from models_llm.cost import usd_cost
from models_llm.ensembles import STEPS


@dataclass(frozen=True)
class JobProgress:
    job: ScoringJob
    fraction: float
    pairs_per_s: float | None
    eta_s: float | None
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None  # at the judge's prices; None when it has none


def job_usage(job: ScoringJob) -> tuple[int, int, int]:
    """Model calls, prompt and completion tokens of the job so far: the sums over its written chunks."""
    sums = job.chunks.aggregate(calls=Sum("calls"), prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    return sums["calls"] or 0, sums["prompt"] or 0, sums["completion"] or 0


def job_progress(job: ScoringJob) -> JobProgress:
    """Speed counts from the first chunk written (model loading excluded) to now or the end; calls, tokens
    and cost add up the written chunks (ensemble members read from the cache cost nothing)."""
    fraction = job.done / job.total if job.total else 1.0
    rate = eta = None
    if job.first_result_at is not None and job.done:
        end = job.finished_at or timezone.now()
        seconds = (end - job.first_result_at).total_seconds()
        written = job.chunks.filter(finished_at__isnull=False).order_by("finished_at")
        first_chunk = written.values_list("size", flat=True).first() or 0
        counted = job.done - first_chunk
        if seconds > 0 and counted > 0:
            rate = counted / seconds
            if job.status == ScoringJob.Status.RUNNING:
                eta = (job.total - job.done) / rate
    calls, prompt, completion = job_usage(job)
    cost = usd_cost(prompt, completion, job.judge.price_in, job.judge.price_out)
    return JobProgress(job=job, fraction=fraction, pairs_per_s=rate, eta_s=eta, calls=calls, prompt_tokens=prompt,
                       completion_tokens=completion, cost_usd=cost)


def jobs_for_project(project: Project, *, limit: int = 20) -> QuerySet[ScoringJob]:
    return ScoringJob.objects.filter(project=project).select_related("judge").order_by("-created_at", "-id")[:limit]


def judges_for_project(project: Project) -> QuerySet[Judge]:
    return Judge.objects.filter(project=project).order_by("name")


@dataclass(frozen=True)
class ObservedAnswers:
    """How an ensemble judge has answered so far: pairs per strategy, the share of them whose strategy got to
    each step, and the mean completion tokens per step. Feeds the dry-run estimate."""

    pairs: int
    reach: dict[tuple[str, str], float]
    completion: dict[tuple[str, str], float]


def observed_answers(judge: Judge, *, limit: int = 2000) -> ObservedAnswers | None:
    """From the judge's newest stored strategy outputs (at most `limit`); None when it has none."""
    rows = list(MemberOutput.objects.filter(judge=judge).order_by("-id").values_list("member", "steps")[:limit])
    if not rows:
        return None
    per_strategy: dict[str, int] = {}
    reached: dict[tuple[str, str], int] = {}
    tokens: dict[tuple[str, str], list[int]] = {}
    for member, steps in rows:
        per_strategy[member] = per_strategy.get(member, 0) + 1
        for step in steps:
            key = (member, step["step"])
            reached[key] = reached.get(key, 0) + 1
            if step.get("completion_tokens") is not None:
                tokens.setdefault(key, []).append(step["completion_tokens"])
    reach = {
        (member, step.name): reached.get((member, step.name), 0) / count
        for member, count in per_strategy.items() if member in STEPS for step in STEPS[member]
    }
    completion = {key: sum(values) / len(values) for key, values in tokens.items() if values}
    return ObservedAnswers(pairs=max(per_strategy.values()), reach=reach, completion=completion)
