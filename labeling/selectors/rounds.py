"""Reads of labelling rounds (#33): each round as the API, the command and the Rounds page show it, and the chart
of what each batch of expert time bought."""
from __future__ import annotations

from labeling.charts import LineChart, line_chart
from labeling.models import LabellingRound, Project, ScoringJob
from labeling.selectors.completeness import current_label_count
from labeling.selectors.job_states import job_state


def _value(cell: dict | None) -> float | None:
    return None if not cell else cell.get("value")


def _state(found: LabellingRound) -> str:
    """labelling (k of N labels) while experts label its batch; then the job's state (refitting while running)."""
    if found.status == LabellingRound.Status.PENDING:
        given = current_label_count(found.project)
        return f"labelling: {max(0, given - found.labels_at_start):,} of {found.budget:,} labels"
    state = job_state(found)
    return "refitting" if state.name == "running" else state.text


def round_row(found: LabellingRound) -> dict:
    numbers = found.numbers or {}
    pool = numbers.get("pool") or {}
    sample = (numbers.get("judge_accuracy") or {}).get("sample") or {}
    return {
        "number": found.number,
        "judge": found.judge.name,
        "budget": found.budget,
        "queue_mix": found.queue_mix,
        "after": found.after,
        "status": found.status,
        "state": _state(found),
        "error": found.error or None,
        "labels_at_start": found.labels_at_start,
        "created_at": found.created_at.isoformat(),
        "finished_at": found.finished_at.isoformat() if found.finished_at else None,
        "labels": numbers.get("labels"),
        "verified_relevant": pool.get("verified_relevant"),
        "model": pool.get("model"),
        "design": pool.get("design"),
        "recall_model": (pool.get("recall_model") or {}).get("value"),
        "recall_design": (pool.get("recall_design") or {}).get("value"),
        "sample_n": sample.get("n"),
        "kappa": sample.get("kappa"),
        "f1": sample.get("f1"),
        "auroc": sample.get("auroc"),
        "ece": sample.get("ece"),
        "calibration": numbers.get("calibration"),
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


def round_chart(rows: list[dict]) -> LineChart | None:
    """Recall of the verified qrels (model- and design-based) and the judge's F1 on the random validation sample,
    round by round; None before a round has measured anything."""
    measured = [row for row in rows if row["labels"] is not None]
    if not measured:
        return None
    series = {
        "recall (model)": [(row["number"], row["recall_model"]) for row in measured],
        "recall (design)": [(row["number"], row["recall_design"]) for row in measured],
        "judge F1 (random sample)": [(row["number"], _value(row["f1"])) for row in measured],
    }
    return line_chart(series, x_name="round", y_name="value")
