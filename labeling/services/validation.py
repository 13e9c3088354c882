"""Validation writes: the cached report of a project (recomputed by a worker after labels or judgments
change) and a judge's calibrator fitted on the gold pairs."""
from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from labeling.models import Judge, JudgeCalibration, Project, ValidationResult
from labeling.selectors.validation import GoldSet, gold_set, judge_arrays, scale_spec
from labeling.tasks import validation_refresh_task
from models_llm.calibration import CalibrationError, calibrator_fit
from models_llm.metrics import human_agreement, judge_report

BOOTSTRAP_DRAWS = 1_000


class ValidationError(ValueError):
    """The report or the calibration cannot be made as asked (unknown judge, too few gold pairs...)."""


def _counts(gold: GoldSet) -> dict[str, int]:
    return {
        "pairs": gold.n_pairs,
        "labelled": gold.n_labelled,
        "gold": int(gold.pair_ids.size),
        "unresolved": gold.n_unresolved,
        "uncertain": gold.n_uncertain,
    }


def _judge_section(gold: GoldSet, judge: Judge, *, bootstrap_draws: int) -> dict:
    arrays = judge_arrays(gold, judge)
    report = judge_report(arrays.data, scale_spec(judge.project), bootstrap_draws=bootstrap_draws, seed=0)
    calibration = judge.calibrations.order_by("-created_at", "-id").first()
    return {
        "name": judge.name,
        **report,
        "n_unresolved": gold.n_unresolved,
        "n_unjudged": arrays.n_unjudged,
        "calibration": None if calibration is None else {
            "method": calibration.method,
            "n": calibration.n,
            "fitted_at": calibration.created_at.isoformat(),
            "cv": calibration.cv,
        },
    }


def validation_compute(*, project: Project, judges: list[Judge] | None = None,
                       bootstrap_draws: int = BOOTSTRAP_DRAWS) -> dict:
    """The validation report of `project` for `judges` (default: all of its judges), computed now."""
    if judges is None:
        judges = list(project.judges.order_by("name"))
    gold = gold_set(project)
    human = gold.human
    return {
        "project": project.slug,
        "computed_at": timezone.now().isoformat(),
        "counts": _counts(gold),
        "human": human_agreement(human.item, human.annotator, human.grade, scale_spec(project)),
        "judges": [_judge_section(gold, judge, bootstrap_draws=bootstrap_draws) for judge in judges],
    }


def validation_refresh(*, project_id: int) -> ValidationResult | None:
    """Recompute and store the cached report of a project unless a report newer than the last request is
    stored already (the task may run twice; the second run then writes nothing)."""
    project = Project.objects.filter(id=project_id).first()
    if project is None:
        return None
    result, _ = ValidationResult.objects.get_or_create(project=project)
    if not result.is_stale:
        return result
    started = timezone.now()
    try:
        data = validation_compute(project=project)
    except Exception as exc:
        ValidationResult.objects.filter(id=result.id).update(error=f"{type(exc).__name__}: {exc}")
        raise
    ValidationResult.objects.filter(id=result.id).update(data=data, computed_at=started, error="")
    result.refresh_from_db()
    if result.is_stale:
        # Labels arrived while computing and did not enqueue a run of their own (one was pending): run again.
        transaction.on_commit(lambda: validation_refresh_task.delay(project_id))
    return result


def validation_request_refresh(*, project: Project) -> None:
    """Mark the project's cached report stale and have a worker recompute it once this transaction commits."""
    now = timezone.now()
    updated = ValidationResult.objects.filter(project=project).update(requested_at=now)
    if not updated:
        ValidationResult.objects.get_or_create(project=project, defaults={"requested_at": now})
    transaction.on_commit(lambda: validation_refresh_task.delay(project.id))


def _mark_stale_and_enqueue(project_id: int) -> None:
    now = timezone.now()
    result, _ = ValidationResult.objects.get_or_create(project_id=project_id)
    already_pending = result.requested_at is not None and (
        result.computed_at is None or result.requested_at > result.computed_at
    )
    ValidationResult.objects.filter(id=result.id).update(requested_at=now)
    if not already_pending:
        validation_refresh_task.delay(project_id)


def validation_request_refresh_soon(*, project: Project) -> None:
    """Like validation_request_refresh, for frequent writes (every expert label): after this transaction
    commits, mark the report stale and enqueue a recomputation only when none is pending already; a
    recomputation that finds newer requests when it finishes runs again (validation_refresh)."""
    project_id = project.id
    transaction.on_commit(lambda: _mark_stale_and_enqueue(project_id))


@transaction.atomic
def judge_calibrate(*, judge: Judge, user=None) -> JudgeCalibration:
    """Fit a calibrator for `judge` on the project's gold pairs (method chosen by 5-fold cross-validated
    Brier) and store it with the data it was fitted on; exports use it from now on."""
    project = judge.project
    gold = gold_set(project)
    arrays = judge_arrays(gold, judge)
    relevant = arrays.data.gold >= project.label_scale.relevant_from
    try:
        fit = calibrator_fit(arrays.p, relevant, folds=5, seed=0)
    except CalibrationError as exc:
        raise ValidationError(f"judge {judge.name!r}: {exc}") from None
    calibration = JudgeCalibration.objects.create(
        judge=judge,
        method=fit.calibrator.method,
        params=fit.calibrator.params,
        cv=fit.cv,
        n=fit.n,
        n_relevant=fit.n_relevant,
        fitted_on={
            "pair_ids": arrays.pair_ids.tolist(),
            "p": arrays.p.tolist(),
            "relevant": relevant.astype(int).tolist(),
        },
        created_by=user,
    )
    Judge.objects.filter(id=judge.id).update(calibration=fit.calibrator.method)
    validation_request_refresh(project=project)
    return calibration


def validation_result_ensure(*, project: Project) -> ValidationResult:
    """The project's cached report; computed and stored now when there is none yet (a stale one is
    returned as is: its recomputation is already queued)."""
    result = ValidationResult.objects.filter(project=project).first()
    if result is not None and result.data is not None:
        return result
    started = timezone.now()
    data = validation_compute(project=project)
    result, _ = ValidationResult.objects.update_or_create(
        project=project, defaults={"data": data, "computed_at": started, "error": ""}
    )
    return result
