"""Scoring jobs: a judge over a project's pairs, split into chunks of one query's pairs that Celery workers
score independently (labeling/services/scoring_chunks.py), and the dry-run estimate of one. Started once per
judge: a running job is resumed, not doubled."""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.llm_adapter import JudgeConfigError, judge_check, judge_config, pair_inputs, prompt_token_counter
from labeling.models import Judge, Judgment, Pair, Project, RunEntry, ScoringChunk, ScoringJob
from labeling.selectors.definitions import current_definitions
from labeling.selectors.scoring import observed_answers, queued_pairs, scoring_job_running
from labeling.selectors.throughput import Throughput, judge_throughput
from labeling.services.judging import query_intent
from labeling.services.rounds_wake import round_wake

# The chunks' services, re-exported: callers start a job and run its chunks through this one module.
from labeling.services.scoring_chunks import (  # noqa: F401
    SweepResult,
    scoring_chunk_fail,
    scoring_chunk_run,
    scoring_sweep,
    worker_name,
)
from labeling.services.scoring_dispatch import (  # noqa: F401
    PriorityError,
    PriorityForbidden,
    priority_require,
    scoring_dispatch,
    scoring_job_priority_set,
    scoring_resend,
)
from labeling.services.throughput import throughput_probe
from models_llm.cost import TokenEstimate, diras_token_estimate
from models_llm.ensembles import LEGACY
from models_llm.ensembles.cost import ensemble_token_estimate


class ScoringError(DomainError):
    """A job that cannot be started or changed as asked (bad judge configuration, unknown pair ids...)."""


def _scope_check(scope: str, pair_ids: Sequence[int] | None) -> None:
    """Pair ids name a selection; with any other scope they would be dropped and the whole scope scored (with a
    paid judge, real money), so the two must go together."""
    if scope not in ScoringJob.Scope.values:
        raise ScoringError(f"scope must be one of {ScoringJob.Scope.values}, got {scope!r}")
    if scope == ScoringJob.Scope.SELECTION and not pair_ids:
        raise ScoringError("a selection job needs pair ids")
    if scope != ScoringJob.Scope.SELECTION and pair_ids is not None:
        raise ScoringError(f"pair ids go with scope 'selection' only; scope {scope!r} scores "
                           f"{ScoringJob.Scope(scope).label}: leave pair_ids out, or ask for scope 'selection'")


def missing_pair_ids(*, project: Project, judge: Judge) -> list[int]:
    """The project's pairs the judge has not judged under their query's current definition."""
    return [pair_id for _, pair_id in _pairs_in_scope(project=project, judge=judge, scope=ScoringJob.Scope.MISSING,
                                                      pair_ids=None)]


def _pairs_in_scope(*, project: Project, judge: Judge, scope: str, pair_ids: Sequence[int] | None) -> list[tuple]:
    """(query id, pair id) of the pairs the job scores, by query then pool order."""
    pairs = Pair.objects.filter(project=project)
    if scope == ScoringJob.Scope.SELECTION:
        wanted = set(pair_ids)
        pairs = pairs.filter(id__in=wanted)
        found = set(pairs.values_list("id", flat=True))
        if found != wanted:
            missing = sorted(wanted - found)
            raise ScoringError(f"pairs {missing[:10]} are not in project {project.slug!r}"
                               + (f" (and {len(missing) - 10} more)" if len(missing) > 10 else ""))
    rows = list(pairs.order_by("query_id", "id").values_list("query_id", "id"))
    if scope != ScoringJob.Scope.MISSING:
        return rows
    current = {qid: d.id for qid, d in current_definitions({q for q, _ in rows}).items()}
    judged = {
        pair_id
        for pair_id, query_id, definition_id in Judgment.objects.filter(judge=judge, pair__project=project)
        .values_list("pair_id", "pair__query_id", "definition_id")
        .iterator(chunk_size=20_000)
        if definition_id == current.get(query_id)
    }
    return [(query_id, pair_id) for query_id, pair_id in rows if pair_id not in judged]


# The order a job scores its pairs in: the pairs that feed validation and the experts' work (a reference grade or an
# expert's label), then those in any run's top RUNS_TOP_DEPTH (the Systems page's nDCG@10), then the rest of the pool.
TIER_GOLD, TIER_RUNS_TOP, TIER_REST = 0, 1, 2
RUNS_TOP_DEPTH = 10


def chunk_size_for(throughput: Throughput | None, *, backend: str | None = None) -> int:
    """Pairs per chunk: SCORING_CHUNK_PAIRS, or fewer for a slow judge, so that a chunk takes about
    SCORING_CHUNK_SECONDS at its measured speed. Jobs share the workers chunk by chunk (scoring_dispatch.py): chunks of
    similar length share them by time, and a slow judge's job does not hold a worker for minutes at each turn.
    An embedding judge (`backend`) encodes each distinct text of a chunk once, so its chunks go up to
    SCORING_EMBEDDING_CHUNK_PAIRS (a query's pairs in one or two chunks instead of dozens, each with its own turn,
    claim and write), or fewer when its measured speed says a chunk would take longer than SCORING_CHUNK_SECONDS."""
    most = (settings.SCORING_EMBEDDING_CHUNK_PAIRS if backend == Judge.Backend.EMBEDDING
            else settings.SCORING_CHUNK_PAIRS)
    if throughput is None:
        return most
    return max(1, min(most, int(throughput.per_s * settings.SCORING_CHUNK_SECONDS)))


def scoring_tiers(*, project: Project, pair_ids: Sequence[int]) -> dict[int, int]:
    """Pair id -> its tier (TIER_GOLD or TIER_RUNS_TOP) for the pairs that are not simply the rest of the pool."""
    wanted = set(pair_ids)
    if not wanted:
        return {}
    tiers: dict[int, int] = {}
    top = set(RunEntry.objects.filter(run__project=project, rank__lte=RUNS_TOP_DEPTH)
              .values_list("query_id", "passage_id").iterator(chunk_size=20_000))
    if top:
        for pair_id, query_id, passage_id in (Pair.objects.filter(project=project)
                                               .values_list("id", "query_id", "passage_id").iterator(chunk_size=20_000)):
            if pair_id in wanted and (query_id, passage_id) in top:
                tiers[pair_id] = TIER_RUNS_TOP
    gold = Pair.objects.filter(project=project).filter(Q(reference_grade__isnull=False) | Q(labels__isnull=False))
    for pair_id in gold.values_list("id", flat=True).distinct().iterator(chunk_size=20_000):
        if pair_id in wanted:
            tiers[pair_id] = TIER_GOLD
    return tiers


@transaction.atomic
def scoring_request(
    *, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING, pair_ids: Sequence[int] | None = None,
    user=None, chunk_pairs: int | None = None, priority: int = 1,
) -> tuple[ScoringJob, bool]:
    """Score `scope` of the project's pairs with `judge` on the workers: (job, created). The judge is locked, so
    two starts at once (two clicks, two API calls, the page and the CLI) never make two jobs: while the judge has
    a running job, that job is resumed (its unwritten chunks queued again) and returned with created False. A
    selection leaves out the pairs a running job of the judge has still to write. The one way to start a job.
    A `priority` above 1 needs a staff `user` (or none: the operator's commands), even for a job resumed."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    _scope_check(scope, pair_ids)
    priority_require(priority=priority, by=user)
    Judge.objects.select_for_update().filter(id=judge.id).first()
    if scope == ScoringJob.Scope.SELECTION and pair_ids:
        queued = queued_pairs(judge_ids=[judge.id])[judge.id]
        fresh = [pair_id for pair_id in pair_ids if pair_id not in queued]
        if fresh:
            return scoring_job_create(project=project, judge=judge, scope=scope, pair_ids=fresh, user=user,
                                      chunk_pairs=chunk_pairs, priority=priority), True
    job = scoring_job_running(judge=judge)
    if job is not None:
        scoring_job_resume(job=job)
        return job, False
    return scoring_job_create(project=project, judge=judge, scope=scope, pair_ids=pair_ids, user=user,
                              chunk_pairs=chunk_pairs, priority=priority), True


@transaction.atomic
def scoring_job_create(
    *, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING, pair_ids: Sequence[int] | None = None,
    user=None, chunk_pairs: int | None = None, priority: int = 1,
) -> ScoringJob:
    """A new job over `scope` of the project's pairs; workers pick the chunks up once this commits. Scope
    `missing` (the default) skips pairs already judged under their query's current definition. Interfaces
    call scoring_request, which never makes a second job for a judge that has one running."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    _scope_check(scope, pair_ids)
    priority_require(priority=priority, by=user)
    try:
        judge_check(judge)
    except JudgeConfigError as exc:
        raise ScoringError(str(exc)) from None
    size = chunk_pairs or chunk_size_for(judge_throughput(judge), backend=judge.backend)
    rows = _pairs_in_scope(project=project, judge=judge, scope=scope, pair_ids=pair_ids)
    job = ScoringJob.objects.create(project=project, judge=judge, scope=scope, total=len(rows), requested_by=user,
                                    priority=priority)
    # Chunks are sent in id order: what the reports need comes first (scoring_tiers).
    tier = scoring_tiers(project=project, pair_ids=[pair_id for _, pair_id in rows])
    rows.sort(key=lambda row: (tier.get(row[1], TIER_REST), row[0], row[1]))
    chunks = []
    for (_, query_id), group in groupby(rows, key=lambda row: (tier.get(row[1], TIER_REST), row[0])):
        ids = [pair_id for _, pair_id in group]
        for start in range(0, len(ids), size):
            part = ids[start:start + size]
            chunks.append(ScoringChunk(job=job, query_id=query_id, pair_ids=part, size=len(part)))
    ScoringChunk.objects.bulk_create(chunks, batch_size=1000)
    if not chunks:
        ScoringJob.objects.filter(id=job.id).update(status=ScoringJob.Status.DONE, finished_at=timezone.now())
        job.refresh_from_db()
        round_wake(judge_id=judge.id)
        return job
    scoring_dispatch(job=job)  # its part of its project's share; each chunk written sends more (scoring_dispatch.py)
    return job


def scoring_job_resume(*, job: ScoringJob) -> int:
    """Queue again every chunk of a running job that was sent and has not been written (its worker was killed, its
    message lost) and fill its project's share; finished chunks are never redone, and a chunk a live worker holds
    is skipped by the second delivery. Returns the number of chunks queued (the project's other jobs' included)."""
    if job.status != ScoringJob.Status.RUNNING:
        return 0
    sent = list(job.chunks.filter(finished_at__isnull=True, dispatched_at__isnull=False).values_list("id", flat=True))
    scoring_resend(job=job, chunk_ids=sent)
    return len(sent) + len(scoring_dispatch(job=job))


@transaction.atomic
def scoring_job_cancel(*, job: ScoringJob) -> ScoringJob:
    """Stop a running job: chunks not yet started are skipped, a chunk being scored stops at its next part;
    what was written stays. Its place in its project's share goes to the project's other running jobs at once."""
    ScoringJob.objects.filter(id=job.id, status=ScoringJob.Status.RUNNING).update(
        status=ScoringJob.Status.CANCELLED, finished_at=timezone.now()
    )
    job.refresh_from_db()
    scoring_dispatch(job=job)
    round_wake(judge_id=job.judge_id)
    return job


def scoring_job_give_up(*, job: ScoringJob, error: str) -> None:
    """The sweep's end of a job past its time limit: cancelled as by its Cancel, with the reason (its chunks'
    lost workers are the chunks' own business, labeling.services.scoring_chunks.scoring_sweep)."""
    scoring_job_cancel(job=job)
    ScoringJob.objects.filter(id=job.id).update(error=error)


ESTIMATE_SAMPLE = 200


@dataclass(frozen=True)
class JobEstimate:
    """A dry run: what a job would send to the judge's model, priced when the judge has prices."""

    judge: Judge
    scope: str
    tokens: TokenEstimate
    cost_usd: float | None
    # DisastIR labelled 1.34M pairs with GPT-4o-mini for about $1,400: our prompts at its prices, same count.
    reference_pairs: int = 1_340_000
    reference_cost_usd: float | None = None
    observed_pairs: int = 0  # ensemble: answers of this judge the estimate learnt from (0: typical values)
    # Wall time on one worker process, from the judge's measured speed (or a timed probe); None when unknown (a
    # remote model that has not scored yet).
    wall_s: float | None = None
    throughput: Throughput | None = None
    sends_prompts: bool = True  # False: an embedding judge, no prompt and no token (tokens all 0)


def _throughput(*, project: Project, judge: Judge, rows: list[tuple], probe: bool) -> Throughput | None:
    """The judge's measured speed, else (with `probe`) a timed probe of the scope's pairs (the project's when the
    scope is empty)."""
    throughput = judge_throughput(judge)
    if throughput is not None or not probe:
        return throughput
    ids = [pair_id for _, pair_id in rows] or list(
        Pair.objects.filter(project=project).order_by("id").values_list("id", flat=True)[:1000])
    try:
        return throughput_probe(judge=judge, pair_ids=ids)
    except (OSError, ValueError, RuntimeError, JudgeConfigError) as exc:
        raise ScoringError(f"judge {judge.name!r} could not be timed on {len(ids[:9])} pairs: "
                           f"{type(exc).__name__}: {exc}"[:500]) from None


# GPT-4o-mini's list prices (USD per million tokens) when DisastIR ran, for the comparison line.
GPT_4O_MINI_PRICES = (0.15, 0.60)


def scoring_job_estimate(
    *, project: Project, judge: Judge, scope: str = ScoringJob.Scope.MISSING, pair_ids: Sequence[int] | None = None,
    sample: int = ESTIMATE_SAMPLE, probe: bool = True,
) -> JobEstimate:
    """Estimate the wall time, calls and tokens of scoring `scope` with a judge, before starting it: prompts of a
    random sample of the pairs (fixed seed) are built and counted with the judge's tokenizer (hf) or from their
    characters (openai); answers take typical lengths. The wall time comes from the judge's measured speed, or, for
    a local model never timed, from a probe of a few pairs (`probe`; labeling/services/throughput.py). Nothing is
    sent to a remote model and nothing is stored."""
    if judge.project_id != project.id:
        raise ScoringError(f"judge {judge.name!r} belongs to another project")
    if judge.is_ensemble:
        raise ScoringError(f"judge {judge.name!r} is a judges ensemble: estimate each of its members")
    try:
        config = judge_config(judge)
    except JudgeConfigError as exc:
        raise ScoringError(str(exc)) from None
    rows = _pairs_in_scope(project=project, judge=judge, scope=scope, pair_ids=pair_ids)
    if config.backend in Judge.Backend.promptless():
        # No prompt and no token bought: what an embedding or cross-encoder judge costs is time.
        tokens = TokenEstimate(pairs=len(rows), sampled=0, calls=0, prompt_tokens=0, completion_tokens=0,
                               exact_prompt_tokens=True)
        throughput = _throughput(project=project, judge=judge, rows=rows, probe=probe)
        return JobEstimate(judge=judge, scope=scope, tokens=tokens, cost_usd=None, throughput=throughput,
                           wall_s=throughput.seconds(len(rows)) if throughput else None, sends_prompts=False)
    chosen = sorted(random.Random(0).sample([pair_id for _, pair_id in rows], min(sample, len(rows))))
    pairs = list(Pair.objects.filter(id__in=chosen).select_related("query", "passage").order_by("id"))
    definitions = current_definitions({pair.query_id for pair in pairs})
    texts = {query_id: d.text for query_id, d in definitions.items()}
    inputs = pair_inputs(pairs, texts)
    try:
        count = prompt_token_counter(config)
    except JudgeConfigError as exc:
        raise ScoringError(str(exc)) from None
    observed = None
    if config.method == Judge.Method.ENSEMBLE:
        # A judge that has answered before (a pilot run) is estimated by how it answered: how far its strategies
        # got before an answer did not parse, and how long its answers were.
        observed = observed_answers(judge)
        tokens = ensemble_token_estimate(
            [(pair_input, query_intent(pair)) for pair, pair_input in zip(pairs, inputs, strict=True)],
            total_pairs=len(rows), strategies=config.strategies, count_tokens=count,
            max_new_tokens=config.max_new_tokens,
            completion=observed.completion if observed else None, reach=observed.reach if observed else None,
            prompts=config.prompts or LEGACY,
        )
    else:
        tokens = diras_token_estimate(inputs, config=config, total_pairs=len(rows), count_tokens=count)
    throughput = _throughput(project=project, judge=judge, rows=rows, probe=probe)
    wall = throughput.seconds(len(rows)) if throughput else None
    return JobEstimate(
        judge=judge, scope=scope, tokens=tokens, cost_usd=tokens.cost(judge.price_in, judge.price_out),
        reference_cost_usd=tokens.cost(*GPT_4O_MINI_PRICES, pairs=JobEstimate.reference_pairs),
        observed_pairs=observed.pairs if observed else 0, wall_s=wall, throughput=throughput,
    )
