"""Reads about scoring: a job's progress (done, failed, speed, time left) and the jobs a page lists."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Exists, Max, OuterRef, QuerySet, Sum
from django.utils import timezone

from labeling.llm_adapter import judge_method, judge_relevance_rule
from labeling.models import Judge, Judgment, MemberOutput, Project, Query, ScoringChunk, ScoringJob
from labeling.selectors.disclosure import job_error_shown
from labeling.selectors.job_states import JobState, scoring_job_state
from models_llm.cost import usd_cost
from models_llm.ensembles import LEGACY, PROMPT_PRESETS, STRATEGIES, steps_for


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
    lost_calls: int = 0  # pairs sent whose answer went with a lost worker (counted in calls, no tokens known)
    stalled: bool = False  # a chunk a worker claimed has not moved for SCORING_STALL_SECONDS (state "stalled")
    error: str = ""  # the job's last error as the reader may see it
    state: JobState | None = None  # queued (N ahead), running, stalled, or how it ended


def job_usage(job: ScoringJob) -> tuple[int, int, int, int]:
    """Model calls (those lost with a worker included), prompt and completion tokens of the job so far, and the
    lost calls: sums over all its chunks' attempts."""
    sums = job.chunks.aggregate(calls=Sum("calls"), lost=Sum("lost_calls"), in_flight=Sum("in_flight"),
                                prompt=Sum("prompt_tokens"), completion=Sum("completion_tokens"))
    lost = sums["lost"] or 0
    return (sums["calls"] or 0) + lost + (sums["in_flight"] or 0), sums["prompt"] or 0, sums["completion"] or 0, lost


def job_last_moved(job: ScoringJob) -> datetime:
    """When the job last showed a sign of progress: its newest chunk claim or part written, else its creation.
    A running job that has not moved for SCORING_STALL_SECONDS is stalled (the page says so, the sweep acts)."""
    moved = job.chunks.aggregate(claimed=Max("claimed_at"), finished=Max("finished_at"))
    return max(filter(None, [moved["claimed"], moved["finished"], job.created_at]))


def job_progress(job: ScoringJob, *, show_errors: bool = False) -> JobProgress:
    """Speed counts from the first chunk written (model loading excluded) to now or the end; calls, tokens
    and cost add up every attempt of every chunk (ensemble members read from the cache cost nothing).
    `show_errors`: False for readers who are not project admins (they get a generic message)."""
    rate = eta = None
    if job.first_result_at is not None and job.done:
        end = job.finished_at or timezone.now()
        seconds = (end - job.first_result_at).total_seconds()
        written = job.chunks.filter(finished_at__isnull=False).order_by("finished_at")
        first_chunk = written.values_list("size", flat=True).first() or 0
        counted = job.done - first_chunk
        if seconds > 0 and counted > 0:
            rate = counted / seconds
    state = scoring_job_state(job)
    if rate and state.name in ("running", "queued"):
        eta = (job.total - job.done) / rate
    calls, prompt, completion, lost = job_usage(job)
    cost = usd_cost(prompt, completion, job.judge.price_in, job.judge.price_out)
    error = job_error_shown(job, show=show_errors)
    return JobProgress(job=job, fraction=job.progress, pairs_per_s=rate, eta_s=eta, calls=calls, prompt_tokens=prompt,
                       completion_tokens=completion, cost_usd=cost, lost_calls=lost, stalled=state.name == "stalled",
                       error=error, state=state)


def queued_pairs(*, judge_ids: Iterable[int], query: Query | None = None) -> dict[int, set[int]]:
    """Per judge, the pairs (of `query`, or all) that its running jobs have queued and no worker has written yet:
    a chunk writes its parts in order, so what follows `written`. Scoring them again would judge them twice."""
    queued: dict[int, set[int]] = defaultdict(set)
    chunks = ScoringChunk.objects.filter(
        finished_at__isnull=True, job__status=ScoringJob.Status.RUNNING, job__judge_id__in=list(judge_ids)
    )
    if query is not None:
        chunks = chunks.filter(query=query)
    for judge_id, pair_ids, written in chunks.values_list("job__judge_id", "pair_ids", "written"):
        queued[judge_id].update(pair_ids[written:])
    return queued


def jobs_for_project(project: Project, *, limit: int = 20) -> QuerySet[ScoringJob]:
    return ScoringJob.objects.filter(project=project).select_related("judge").order_by("-created_at", "-id")[:limit]


def judges_for_project(project: Project) -> QuerySet[Judge]:
    return Judge.objects.filter(project=project).order_by("name")


def judges_with_judgments(*, project: Project) -> QuerySet[Judge]:
    """The project's judges that have at least one P (an ok judgment), by name: those the disagreement queue
    compares and the validation page offers. One EXISTS probe per judge on the (judge, p_relevant) index."""
    has_p = Judgment.objects.filter(judge=OuterRef("pk"), status=Judgment.Status.OK)
    return judges_for_project(project).filter(Exists(has_p))


@dataclass(frozen=True)
class JudgeSummary:
    name: str
    backend: str
    model: str
    method: str
    endpoint: str
    price_in: float | None
    price_out: float | None
    created_at: datetime
    relevance_rule: str


def judge_summary(judge: Judge) -> JudgeSummary:
    """What the API shows of a judge: its settings as chosen, nothing the operator declared (no URL, no key
    variable)."""
    parameters = judge.parameters or {}
    method = "" if judge.is_imported or judge.is_ensemble else judge_method(judge)
    return JudgeSummary(name=judge.name, backend=judge.backend, model=judge.model, method=method,
                        endpoint=parameters.get("endpoint", ""), price_in=judge.price_in, price_out=judge.price_out,
                        created_at=judge.created_at, relevance_rule=judge_relevance_rule(judge).text)


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
    prompts = (judge.parameters or {}).get("prompts") or LEGACY
    if prompts not in PROMPT_PRESETS:
        prompts = LEGACY  # judge_config refuses such a judge before it is estimated
    reach = {
        (member, step.name): reached.get((member, step.name), 0) / count
        for member, count in per_strategy.items() if member in STRATEGIES
        for step in steps_for(member, prompts)
    }
    completion = {key: sum(values) / len(values) for key, values in tokens.items() if values}
    return ObservedAnswers(pairs=max(per_strategy.values()), reach=reach, completion=completion)


def scoring_job_running(*, judge: Judge) -> ScoringJob | None:
    """The judge's running scoring job, if any (scoring_request never makes a second one)."""
    return ScoringJob.objects.filter(judge=judge, status=ScoringJob.Status.RUNNING).order_by("id").first()
