"""Robustness audits as background work: an AuditJob's probes (prompts built from the project's data, never stored
as pairs) are scored by one worker with the judge's own scorer, batch by batch, and the kind's report is kept on
the row. The kinds build their probes and reports in labeling/services/audit_perturbation.py,
labeling/services/audit_multicondition.py and labeling/services/audit_beyond_pool.py; this module starts, runs,
fails and prices them the one way."""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import F, QuerySet
from django.db.models.functions import Coalesce
from django.utils import timezone

from labeling.llm_adapter import JudgeConfigError, judge_config, prompt_token_counter, scorer_for
from labeling.models import AuditJob, Judge, Pair, Project
from labeling.selectors.throughput import judge_throughput
from labeling.services import audit_beyond_pool, audit_multicondition, audit_perturbation
from labeling.services.audit_errors import AuditConflict, AuditError
from labeling.services.jobs import job_cancel, job_fail, job_heartbeat, job_take
from labeling.services.scoring_dispatch import bulk_queue_for
from labeling.services.throughput import throughput_probe
from labeling.tasks import audit_task
from models_llm.audit.robustness import samples_text
from models_llm.audit.types import Probe
from models_llm.backends import Scorer, ScorerConfigError, load_scorer
from models_llm.cost import TokenEstimate, diras_token_estimate
from models_llm.types import JudgeConfig, Verdict

__all__ = ["AuditError", "AuditEstimate", "audit_cancel", "audit_estimate", "audit_fail", "audit_probes", "audit_run",
           "audit_request"]


@dataclass(frozen=True)
class _Kind:
    parameters: Callable[[Mapping], dict]
    probes: Callable[..., list[Probe]]
    report: Callable[..., dict]


KINDS: dict[str, _Kind] = {
    AuditJob.Kind.PERTURBATION: _Kind(audit_perturbation.perturbation_parameters,
                                      audit_perturbation.perturbation_probes, audit_perturbation.perturbation_report),
    AuditJob.Kind.MULTICONDITION: _Kind(audit_multicondition.multicondition_parameters,
                                        audit_multicondition.multicondition_probes,
                                        audit_multicondition.multicondition_report),
    AuditJob.Kind.BEYOND_POOL: _Kind(audit_beyond_pool.beyond_pool_parameters, audit_beyond_pool.beyond_pool_probes,
                                     audit_beyond_pool.beyond_pool_report),
}


def _kind(kind: str) -> _Kind:
    if kind not in KINDS:
        raise AuditError(f"kind must be one of {sorted(KINDS)}, got {kind!r}")
    return KINDS[kind]


def audit_judge_config(judge: Judge) -> JudgeConfig:
    """The configuration the audit runs, or AuditError saying why this judge cannot be audited: a judges ensemble
    or a strategy ensemble (audit each member: their prompts are their members'), an imported judge (no model
    to ask)."""
    if judge.is_ensemble:
        raise AuditConflict(f"judge {judge.name!r} is a judges ensemble: audit each of its members")
    if judge.is_imported:
        raise AuditConflict(f"judge {judge.name!r} was imported with its judgments: it has no model to ask")
    try:
        config = judge_config(judge)
    except JudgeConfigError as exc:
        raise AuditConflict(str(exc)) from None
    if config.method == Judge.Method.ENSEMBLE:
        raise AuditConflict(f"judge {judge.name!r} is a prompt-strategy ensemble: audit a judge of one prompt")
    return config


def _prepare(*, project: Project, judge: Judge, kind: str, parameters: Mapping) -> tuple[_Kind, dict, list[Probe]]:
    if judge.project_id != project.id:
        raise AuditError(f"judge {judge.name!r} belongs to another project")
    spec = _kind(kind)
    audit_judge_config(judge)
    clean = spec.parameters(parameters)
    probes = spec.probes(project=project, judge=judge, parameters=clean)
    if not probes:
        raise AuditConflict("the audit has nothing to ask the judge")
    return spec, clean, probes


@transaction.atomic
def audit_request(
    *, project: Project, judge: Judge, kind: str, parameters: Mapping, user: AbstractBaseUser | None = None
) -> AuditJob:
    """Queue an audit of `judge`: its probes are built now (so a project without what the audit needs is refused
    at once, AuditError saying what is missing) and again, identically, by the worker."""
    _, clean, probes = _prepare(project=project, judge=judge, kind=kind, parameters=parameters)
    job = AuditJob.objects.create(project=project, judge=judge, kind=kind, parameters=clean, total=len(probes),
                                  requested_by=user)
    queue = bulk_queue_for(judge)  # GPU_QUEUE for a judge on a GPU (docs/operations.md, "Queues")
    transaction.on_commit(lambda: audit_task.apply_async((job.id,), queue=queue))
    return job


def _sampled_scorer(config: JudgeConfig) -> Scorer:
    """A second scorer of the same model that samples its generated text (the self-consistency test)."""
    return load_scorer(replace(config, temperature=settings.AUDIT_TEMPERATURE))


def _audit_take(job_id: int) -> int | None:
    """Take the audit for this worker (job_take): the attempt number it now owns, or None when the audit is finished
    or a live worker holds it."""
    with transaction.atomic():
        job = AuditJob.objects.select_for_update().filter(id=job_id, finished_at__isnull=True).first()
        if job is None or not job_take(AuditJob.objects.filter(id=job_id), done=0, calls=0, prompt_tokens=None,
                                       completion_tokens=None):
            return None
        return job.attempts + 1


def audit_run(*, job_id: int) -> None:
    """Score every probe of the audit (batches of AUDIT_BATCH, progress and a heartbeat written after each) and
    keep the report. A retried audit, or one whose worker died, starts over; a finished or cancelled one, or one a
    live worker holds, is left as it is. A worker that lost the audit (cancelled, taken over) stops at its next
    batch and reports nothing."""
    attempt = _audit_take(job_id)
    if attempt is None:
        return
    owned = AuditJob.objects.filter(id=job_id, status=AuditJob.Status.RUNNING, attempts=attempt)
    with job_heartbeat(owned):
        job = AuditJob.objects.select_related("project", "judge").get(id=job_id)
        spec = _kind(job.kind)
        probes = spec.probes(project=job.project, judge=job.judge, parameters=job.parameters)
        verdicts = _score(job, probes, owned)
        if verdicts is None:
            return
        report = spec.report(project=job.project, judge=job.judge, parameters=job.parameters, probes=probes,
                             verdicts=verdicts)
        owned.update(report=report, status=AuditJob.Status.DONE, finished_at=timezone.now(),
                     heartbeat_at=timezone.now())


def _score(job: AuditJob, probes: Sequence[Probe], owned: QuerySet[AuditJob]) -> list[Verdict] | None:
    """The verdict of every probe, in order; None when the worker lost the audit on the way."""
    config = audit_judge_config(job.judge)
    scorers: dict[bool, Scorer] = {False: scorer_for(job.judge)}
    if not samples_text(config):
        scorers[True] = scorers[False]  # its answers do not depend on sampling: no second copy of the model
    verdicts: list[Verdict] = []
    step = max(1, settings.AUDIT_BATCH)
    try:
        for start in range(0, len(probes), step):
            batch = probes[start:start + step]
            answers: dict[int, Verdict] = {}
            for sampled in (False, True):
                asked = [probe.pair for probe in batch if probe.sampled == sampled]
                if not asked:
                    continue
                if sampled not in scorers:
                    try:
                        scorers[True] = _sampled_scorer(config)
                    except ScorerConfigError as exc:
                        raise AuditError(str(exc)) from None
                answers.update({verdict.pair_id: verdict for verdict in scorers[sampled].score(asked)})
            verdicts += [answers[probe.pair.pair_id] for probe in batch]
            prompt = sum(v.prompt_tokens or 0 for v in answers.values())
            completion = sum(v.completion_tokens or 0 for v in answers.values())
            calls = sum(v.calls or 1 for v in answers.values() if v.status != "failed" or v.prompt_tokens)
            moved = owned.update(
                done=start + len(batch), calls=F("calls") + calls, heartbeat_at=timezone.now(),
                prompt_tokens=_plus("prompt_tokens", prompt), completion_tokens=_plus("completion_tokens", completion))
            if not moved:
                return None  # cancelled, or taken over: what it scored is not reported
    finally:
        if scorers.get(True, scorers[False]) is not scorers[False]:
            scorers[True].close()
    return verdicts


def _plus(field: str, value: int):
    return Coalesce(F(field), 0) + value


def audit_fail(*, job_id: int, error: str) -> None:
    """Give up on the audit: failed, with the error; no report."""
    job_fail(AuditJob.objects.filter(id=job_id), error=error)


@transaction.atomic
def audit_cancel(*, job: AuditJob) -> AuditJob:
    """Stop an unfinished audit: its worker stops after the batch it is scoring, and no report is made."""
    return job_cancel(job)


ESTIMATE_SAMPLE = 200


@dataclass(frozen=True)
class AuditEstimate:
    """A dry run of an audit: the probes it would ask, what they would cost the judge's model (None for an
    embedding judge: no prompt, no token), and how long building the probes took (the variant generation)."""

    probes: int
    sampled_probes: int
    tokens: TokenEstimate | None
    cost_usd: float | None
    build_seconds: float
    parameters: dict
    # Wall time of the audit's model calls on one worker process, from the judge's measured speed (or a timed probe
    # of a few of the project's pairs); None for a remote model that has not scored yet.
    wall_s: float | None = None
    speed: str = ""


def audit_estimate(*, project: Project, judge: Judge, kind: str, parameters: Mapping,
                   probe: bool = False) -> AuditEstimate:
    """What an audit would ask and cost, before it runs: its probes are built (nothing is stored, no model is
    asked) and the prompts of a fixed-seed sample of them counted with the judge's tokenizer (hf) or from their
    characters (openai). The time comes from the judge's measured speed; without one, only with `probe` (the
    operator's commands, which may wait) is its model loaded and timed on a few pairs: the page and the API answer
    within a web request, and leave the time unknown (the Judges page's Estimate measures it on a worker)."""
    started = time.perf_counter()
    _, clean, probes = _prepare(project=project, judge=judge, kind=kind, parameters=parameters)
    built = time.perf_counter() - started
    config = audit_judge_config(judge)
    tokens = cost = None
    if config.backend not in Judge.Backend.promptless():
        try:
            count = prompt_token_counter(config)
        except JudgeConfigError as exc:
            raise AuditError(str(exc)) from None
        sample = random.Random(0).sample(probes, min(ESTIMATE_SAMPLE, len(probes)))
        tokens = diras_token_estimate([probe.pair for probe in sample], config=config, total_pairs=len(probes),
                                      count_tokens=count)
        cost = tokens.cost(judge.price_in, judge.price_out)
    throughput = judge_throughput(judge)
    if throughput is None and probe:
        throughput = throughput_probe(judge=judge, pair_ids=list(
            Pair.objects.filter(project=project).order_by("id").values_list("id", flat=True)[:1000]))
    return AuditEstimate(probes=len(probes), sampled_probes=sum(p.sampled for p in probes), tokens=tokens,
                         cost_usd=cost, build_seconds=built, parameters=clean,
                         wall_s=throughput.seconds(len(probes)) if throughput else None,
                         speed=throughput.text if throughput else "")


def audit_probes(*, project: Project, judge: Judge, kind: str, parameters: Mapping) -> Sequence[Probe]:
    """The probes an audit asks (for a bench or a look at the variants): built exactly as the worker builds them."""
    return _prepare(project=project, judge=judge, kind=kind, parameters=parameters)[2]
