"""Reads of labelling rounds (#33, #48): each round as the API, the command and the Rounds page show it (its numbers
before and after its refit or retrain), what a round can do before it starts (the refit's outlook), and the chart
of what each batch of expert time bought."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from labeling.charts import LineChart, line_chart
from labeling.models import Judge, LabellingRound, Project, ScoringJob
from labeling.selectors.calibration_basis import calibration_basis
from labeling.selectors.completeness import current_label_count
from labeling.selectors.completeness_report import RoundMeasure, RoundNumbers
from labeling.selectors.job_states import job_state
from labeling.selectors.validation import CALIBRATION_FOLDS, gold_set, judge_arrays


@dataclass(frozen=True)
class RefitOutlook:
    """What a round with `judge` can do before it starts: the gold pairs the judge scored, relevant and not, against
    the CALIBRATION_FOLDS of each that a refit of its calibrator needs. A round's labels add at most its budget."""

    judge: str
    needs_each: int
    relevant: int
    non_relevant: int
    left_out: str | None = None  # why some gold pairs are not fitted on (labeling.selectors.calibration_basis)

    @property
    def missing_relevant(self) -> int:
        return max(0, self.needs_each - self.relevant)

    @property
    def missing_non_relevant(self) -> int:
        return max(0, self.needs_each - self.non_relevant)

    @property
    def ready(self) -> bool:
        return not (self.missing_relevant or self.missing_non_relevant)

    @property
    def statement(self) -> str:
        have = (f"judge {self.judge!r} has scored {self.relevant:,} relevant and {self.non_relevant:,} non-relevant "
                f"gold pairs{' to fit on' if self.left_out else ''}; a refit of its calibrator needs "
                f"{self.needs_each} of each")
        if self.ready:
            return f"{have}: a round refits it"
        missing = " and ".join(f"{n} more {side}" for n, side in ((self.missing_relevant, "relevant"),
                                                                   (self.missing_non_relevant, "non-relevant")) if n)
        least = self.missing_relevant + self.missing_non_relevant
        return (f"{have}: a round refits it only if its labels bring {missing} (a batch adds at most its budget, "
                f"so at least {least} labels); otherwise the round measures the numbers and ends without a refit, "
                "saying why")

    def as_dict(self) -> dict:
        return {**asdict(self), "missing_relevant": self.missing_relevant,
                "missing_non_relevant": self.missing_non_relevant, "ready": self.ready, "statement": self.statement}


def refit_outlook(*, project: Project) -> list[RefitOutlook]:
    """For each of the project's judges (by name), what a round's refit of its calibrator can do now: the gold pairs
    it scored, counted as the refit counts them (labeling.services.validation.judge_calibrate)."""
    gold = gold_set(project)
    relevant_from = project.label_scale.relevant_from
    basis = calibration_basis(project)
    out = []
    for judge in Judge.objects.filter(project=project).order_by("name"):
        arrays = judge_arrays(gold, judge)  # the gold pairs the judge scored, as the refit takes them
        scored = arrays.data.gold[basis.kept(arrays.pair_ids)]
        relevant = int((scored >= relevant_from).sum())
        out.append(RefitOutlook(judge=judge.name, needs_each=CALIBRATION_FOLDS, relevant=relevant,
                                non_relevant=int(scored.size) - relevant, left_out=basis.note))
    return out


def _value(cell: dict | None) -> float | None:
    return None if not cell else cell.get("value")


def _waiting_state(found: LabellingRound) -> str:
    """A round waiting for its retrain: retraining while the student trains, re-scoring while it scores the pool."""
    job = found.finetune
    if job is None or job.finished_at is None:
        step = f": step {job.step:,} of {job.total_steps:,}" if job is not None and job.total_steps else ""
        return f"retraining{step}"
    scoring = ScoringJob.objects.filter(judge_id=job.student_id).order_by("-id").first()
    if scoring is None:
        return "re-scoring"
    return f"re-scoring: {scoring.done:,} of {scoring.total:,} pairs"


def _state(found: LabellingRound) -> str:
    """labelling (k of N labels) while experts label its batch; measuring while a worker holds it; retraining or
    re-scoring while it waits for its retrained student; then how it ended."""
    if found.status == LabellingRound.Status.PENDING:
        given = current_label_count(found.project)
        return f"labelling: {max(0, given - found.labels_at_start):,} of {found.budget:,} labels"
    if found.status == LabellingRound.Status.RUNNING and found.waiting_since is not None:
        return _waiting_state(found)
    state = job_state(found)
    if state.name == "running":
        return "measuring"
    if state.name == "done" and round_numbers(found).reason:
        return "done, not refitted"
    return state.text


def round_numbers(found: LabellingRound) -> RoundNumbers:
    """What the round measured so far, as stored."""
    return RoundNumbers.from_dict(found.numbers)


def _figures(measured: RoundMeasure | None) -> dict | None:
    """One measurement as the row shows it: the pool's estimates, the verified qrels' recall, the judge's accuracy
    on the random validation sample (each value with its interval) and the stopping state."""
    if measured is None:
        return None
    pool, stopping = measured.pool, measured.stopping
    sample = measured.judge_accuracy.sample if measured.judge_accuracy else {}
    return {
        "judge": measured.judge,
        "basis": measured.basis,
        "verified_relevant": pool.verified_relevant,
        "model": pool.model,
        "design": pool.design,
        "recall_model": pool.recall_model["value"],
        "recall_design": pool.recall_design["value"],
        "sample_n": sample.get("n"),
        **{name: sample.get(name) for name in ("kappa", "f1", "auroc", "ece")},
        "stopping": {"met": stopping.met, "probability": stopping.probability, "target": stopping.target,
                     "budget_met": stopping.budget_met} if stopping else None,
    }


def round_row(found: LabellingRound) -> dict:
    """A round as the API, the command and the page show it: its settings and state, the numbers measured before
    and after its refit or retrain, and at the top the latest of them (after, else before)."""
    numbers = round_numbers(found)
    before, after = _figures(numbers.before), _figures(numbers.after)
    latest = after or before or {}
    return {
        "number": found.number,
        "judge": found.judge.name,
        "budget": found.budget,
        "queue_mix": found.queue_mix,
        "graded": found.graded,
        "after": found.after,
        "status": found.status,
        "state": _state(found),
        "error": found.error or None,
        "reason": numbers.reason,
        "labels_at_start": found.labels_at_start,
        "created_at": found.created_at.isoformat(),
        "finished_at": found.finished_at.isoformat() if found.finished_at else None,
        "labels": numbers.labels,
        **{key: latest.get(key) for key in ("verified_relevant", "model", "design", "recall_model", "recall_design",
                                            "sample_n", "kappa", "f1", "auroc", "ece")},
        "before": before,
        "after_refit": after,
        "calibration": asdict(numbers.calibration) if numbers.calibration else None,
        "student": _student(found),
    }


def _student(found: LabellingRound) -> dict | None:
    """After 'student': the retrain the round started, as it stands (fine-tuning, then the new student scoring the
    pool)."""
    job = found.finetune
    if job is None:
        return None
    scoring = None
    if job.student_id is not None:
        latest = ScoringJob.objects.filter(judge_id=job.student_id).order_by("-id").first()
        if latest is not None:
            scoring = {"id": latest.id, "status": latest.status, "done": latest.done,
                       "total": latest.total}
    return {"job": job.id, "name": job.student_name, "status": job.status, "step": job.step,
            "total_steps": job.total_steps, "training_set": job.training_set.name, "examples": job.examples,
            "error": job.error or None, "scoring": scoring}


def round_rows(*, project: Project) -> list[dict]:
    """The project's rounds, oldest first."""
    return [round_row(found) for found in
            LabellingRound.objects.filter(project=project).select_related("judge", "finetune__training_set")
            .order_by("number")]


def _non_negative(value: float | None) -> float | None:
    # The chart's axis runs from 0 to 1: a kappa below chance leaves a gap there (the table holds its value).
    return None if value is None or value < 0 else value


def round_chart(rows: list[dict]) -> LineChart | None:
    """Round by round, what each ended with (after its refit or retrain, else as measured before): the judge's
    AUROC, ECE, kappa and F1 on the random validation sample and the verified qrels' recall (model- and
    design-based); None before a round has measured anything."""
    measured = [row for row in rows if row["labels"] is not None]
    if not measured:
        return None
    series = {
        "judge AUROC": [(row["number"], _value(row["auroc"])) for row in measured],
        "judge ECE": [(row["number"], _value(row["ece"])) for row in measured],
        "judge kappa": [(row["number"], _non_negative(_value(row["kappa"]))) for row in measured],
        "judge F1": [(row["number"], _value(row["f1"])) for row in measured],
        "recall (model)": [(row["number"], row["recall_model"]) for row in measured],
        "recall (design)": [(row["number"], row["recall_design"]) for row in measured],
    }
    return line_chart(series, x_name="round", y_name="value")
