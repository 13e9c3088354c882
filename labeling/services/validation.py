"""Validation writes: the cached report of a project (recomputed by a worker after labels or judgments
change, debounced) and a judge's calibrator fitted on the gold pairs."""
from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from labeling.exceptions import DomainError
from labeling.job_kinds import VALIDATION
from labeling.models import Judge, JudgeCalibration, Project, ValidationResult
from labeling.selectors.calibration_basis import calibration_basis
from labeling.selectors.completeness import CompletenessOptionsError, completeness_compute
from labeling.selectors.completeness_report import CompletenessUnavailable
from labeling.selectors.coverage import coverage_queued
from labeling.selectors.definition_metrics import judge_metrics_by_definition
from labeling.selectors.degenerate import judge_degeneracy
from labeling.selectors.scoring import queued_pairs
from labeling.selectors.validation import (
    CALIBRATION_FOLDS,
    DEFAULT_OPTIONS,
    GoldGrades,
    GoldSet,
    ReportOptions,
    gold_grades,
    gold_set,
    judge_arrays,
    scale_spec,
)
from labeling.selectors.validation_report import (
    JudgeSection,
    ReportCounts,
    ReportedOptions,
    SectionCalibration,
    ValidationReport,
    holds_report,
)
from labeling.services.jobs import job_fail, job_heartbeat, job_take, refresh_again, refresh_ask
from labeling.tasks import validation_refresh_task
from models_llm.calibration import CalibrationError, calibrator_fit
from models_llm.metrics import human_agreement, judge_report

BOOTSTRAP_DRAWS = 1_000


class ValidationReportError(DomainError):
    """The report or the calibration cannot be made as asked (unknown judge, too few gold pairs...)."""


def _counts(gold: GoldSet, relevant_from: int) -> ReportCounts:
    return ReportCounts(pairs=gold.n_pairs, labelled=gold.n_labelled, gold=int(gold.pair_ids.size),
                        non_relevant=int((gold.gold < relevant_from).sum()), unresolved=gold.n_unresolved,
                        uncertain=gold.n_uncertain, ungraded=gold.n_ungraded, added=gold.n_added)


def _judge_section(gold: GoldSet, judge: Judge, *, bootstrap_draws: int, options: ReportOptions,
                   grades: GoldGrades, queued: set[int]) -> JudgeSection:
    arrays = judge_arrays(gold, judge)
    report = judge_report(arrays.data, scale_spec(judge.project), bootstrap_draws=bootstrap_draws, seed=0,
                          cutoffs=options.cutoffs)
    calibration = judge.calibrations.order_by("-created_at", "-id").first()
    return JudgeSection(
        name=judge.name,
        metrics=report,
        n_unresolved=gold.n_unresolved,
        n_unjudged=arrays.n_unjudged,
        # Its metrics are on the pairs it judged under any version; a partial judge is one the page does not rank,
        # marked with how many of the pairs it lacks are queued for scoring (labeling.services.gold_scoring).
        coverage=coverage_queued(judge=judge, needed=gold.pair_ids, queued=queued),
        # Its calls on every pair it judged, as its qrels grade them: a degenerate judge is never the best.
        degenerate=judge_degeneracy(judge=judge, gold=grades),
        calibration=None if calibration is None else SectionCalibration(
            method=calibration.method, n=calibration.n, fitted_at=calibration.created_at.isoformat(),
            cv=calibration.cv),
    )


def validation_compute(*, project: Project, judges: list[Judge] | None = None,
                       bootstrap_draws: int = BOOTSTRAP_DRAWS,
                       options: ReportOptions = DEFAULT_OPTIONS) -> ValidationReport:
    """The validation report of `project` for `judges` (default: all of its judges), computed now with
    `options` (all pairs, evaluation units, cut-offs)."""
    if judges is None:
        judges = list(project.judges.order_by("name"))
    return _report(project, judges, gold_set(project, options), bootstrap_draws, options)


def _report(project: Project, judges: list[Judge], gold: GoldSet, bootstrap_draws: int,
            options: ReportOptions) -> ValidationReport:
    human = gold.human
    grades = gold_grades(project, gold)
    queued = queued_pairs(judge_ids=[judge.id for judge in judges])
    return ValidationReport(
        project=project.slug,
        computed_at=timezone.now().isoformat(),
        options=ReportedOptions.of(options, gold.n_units),
        counts=_counts(gold, project.label_scale.relevant_from),
        human=human_agreement(human.item, human.annotator, human.grade, scale_spec(project)),
        judges=[_judge_section(gold, judge, bootstrap_draws=bootstrap_draws, options=options, grades=grades,
                               queued=queued[judge.id]) for judge in judges],
    )


def _report_to_cache(project: Project) -> ValidationReport:
    """The report as the cache keeps it, with the default options: every judge's section, every judge's metrics by
    definition version (read by the dashboard and the API instead of being computed per request), and how complete
    the qrels are under the queue judge (the overview's card)."""
    judges = list(project.judges.order_by("name"))
    gold = gold_set(project)
    try:
        completeness = completeness_compute(project=project, gold=gold)
    except CompletenessOptionsError as exc:
        completeness = CompletenessUnavailable(str(exc))
    return replace(_report(project, judges, gold, BOOTSTRAP_DRAWS, DEFAULT_OPTIONS), completeness=completeness,
                   by_definition={judge.name: judge_metrics_by_definition(judge=judge, gold=gold) for judge in judges})


def validation_refresh(*, project_id: int) -> ValidationResult | None:
    """Recompute and store the cached report of a project unless a report newer than the last request is
    stored already, or a live worker computes it (the task may run twice; the second run then writes nothing). An
    error is recorded at once with validation_fail, so that the next request queues a new recomputation,
    and raised."""
    project = Project.objects.filter(id=project_id).first()
    if project is None:
        return None
    result, _ = ValidationResult.objects.get_or_create(project=project)
    if not result.is_stale:
        return result
    started = timezone.now()
    rows = ValidationResult.objects.filter(id=result.id)
    if not job_take(rows, now=started):
        return rows.get()  # a live worker computes it
    with job_heartbeat(rows):
        try:
            report = _report_to_cache(project)
        except Exception as exc:
            validation_fail(project_id=project_id, error=f"{type(exc).__name__}: {exc}")
            raise
        return _report_store(result=result, report=report, started=started)


def validation_fail(*, project_id: int, error: str) -> None:
    """Give up on the pending recomputation of a project's report: failed, with the error. The report stored
    stays, and the next request queues a new recomputation."""
    job_fail(ValidationResult.objects.filter(project_id=project_id), error=error)


def _report_store(*, result: ValidationResult, report: ValidationReport, started: datetime) -> ValidationResult:
    """Store a report computed from `started` on: done, unless requests arrived meanwhile and queued nothing
    (it was pending): then it is pending again and queued, when due."""
    rows = ValidationResult.objects.filter(id=result.id)
    rows.update(data=report.to_dict(), computed_at=started, status=ValidationResult.Status.DONE, error="",
                finished_at=timezone.now())
    countdown = refresh_again(VALIDATION, rows, started=started)
    if countdown is not None:
        project_id = result.project_id
        transaction.on_commit(lambda: validation_refresh_task.apply_async((project_id,), countdown=countdown))
    return rows.get()


def _mark_stale(project_id: int, user: AbstractBaseUser | None) -> float | None:
    """Mark the project's report stale. Returns the countdown of the recomputation to queue, or None when one
    is pending already: it will read the data as they are when it runs. One conditional UPDATE decides, so of
    two requests at once only one queues (and names its user as the requester)."""
    ValidationResult.objects.get_or_create(project_id=project_id)
    return refresh_ask(VALIDATION, ValidationResult.objects.filter(project_id=project_id), now=timezone.now(),
                       user=user)


def _enqueue(project_id: int, countdown: float | None) -> None:
    if countdown is not None:
        validation_refresh_task.apply_async((project_id,), countdown=countdown)


def validation_request(*, project: Project, user: AbstractBaseUser | None = None) -> None:
    """Mark the project's cached report stale and, once this transaction commits, have a worker recompute it:
    debounced, so that however often this is called one recomputation is queued at a time and a project's
    report is computed at most once per VALIDATION_REFRESH_MIN_SECONDS. `user`: the person who asked, if any
    (a change of data asks too)."""
    project_id = project.id
    countdown = _mark_stale(project_id, user)
    transaction.on_commit(lambda: _enqueue(project_id, countdown))


def validation_request_soon(*, project: Project) -> None:
    """Like validation_request, for frequent writes (every expert label): the report is marked stale
    only after this transaction commits, so that labels do not wait on each other for the report's row."""
    project_id = project.id
    transaction.on_commit(lambda: _enqueue(project_id, _mark_stale(project_id, None)))


@transaction.atomic
def judge_calibrate(*, judge: Judge, user=None, gold: GoldSet | None = None) -> JudgeCalibration:
    """Fit a calibrator for `judge` on the project's gold pairs (method chosen by 5-fold cross-validated
    Brier) and store it with the data it was fitted on; exports use it from now on. Reference grades that were
    chosen by their grade (all on one side of the threshold) are left out (labeling.selectors.calibration_basis).
    `gold`: the project's gold set when the caller has built it already."""
    project = judge.project
    gold = gold if gold is not None else gold_set(project)
    arrays = judge_arrays(gold, judge)
    basis = calibration_basis(project)
    kept = basis.kept(arrays.pair_ids)
    relevant = arrays.data.gold[kept] >= project.label_scale.relevant_from
    try:
        fit = calibrator_fit(arrays.p[kept], relevant, folds=CALIBRATION_FOLDS, seed=0)
    except CalibrationError as exc:
        raise ValidationReportError(f"judge {judge.name!r}: {exc}" + (f" ({basis.note})" if basis.note else "")
                                    ) from None
    calibration = JudgeCalibration.objects.create(
        judge=judge,
        method=fit.calibrator.method,
        params=fit.calibrator.params,
        cv=fit.cv,
        n=fit.n,
        n_relevant=fit.n_relevant,
        fitted_on={
            "pair_ids": arrays.pair_ids[kept].tolist(),
            "p": arrays.p[kept].tolist(),
            "relevant": relevant.astype(int).tolist(),
        },
        created_by=user,
    )
    Judge.objects.filter(id=judge.id).update(calibration=fit.calibrator.method)
    validation_request(project=project)
    return calibration


def validation_result_ensure(*, project: Project) -> ValidationResult:
    """The project's cached report; computed and stored now when there is none yet, or the one stored was made
    before the report held the metrics by definition version (a stale one is returned as is: its recomputation
    is already queued)."""
    result = ValidationResult.objects.filter(project=project).first()
    if holds_report(result):
        return result
    started = timezone.now()
    report = _report_to_cache(project)
    result, _ = ValidationResult.objects.get_or_create(project=project)
    return _report_store(result=result, report=report, started=started)
